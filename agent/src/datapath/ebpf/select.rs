//! A `Selection` in `ccp-ebpf`'s terms.

use ccp_ebpf::attach::{Attach, Detach, Filter, Namespaces};

use crate::datapath::attach::Selection;

fn filter(sel: &Selection) -> Result<Option<Filter>, String> {
    let nets = sel.addrs.iter().map(|a| a.parse()).collect::<Result<Vec<_>, _>>()?;
    let f = Filter { all: sel.all, ports: sel.ports.clone(), nets };
    if !f.selects_something() {
        return Ok(None);
    }
    f.validate()?;
    Ok(Some(f))
}

fn namespaces(sel: &Selection) -> Namespaces {
    Namespaces { paths: sel.netns.clone(), all: sel.all_netns }
}

pub fn to_attach(sel: &Selection) -> Result<Attach, String> {
    let existing = filter(sel)?;
    Ok(Attach {
        new_flows: existing.clone().unwrap_or_else(Filter::all),
        existing,
        namespaces: namespaces(sel),
        cgroups: sel.cgroups.clone(),
        set_default: sel.set_default,
    })
}

pub fn to_detach(sel: &Selection) -> Result<Detach, String> {
    if sel.set_default {
        return Err("set_default applies to attach only".into());
    }
    Ok(Detach { filter: filter(sel)?, namespaces: namespaces(sel), cgroups: sel.cgroups.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selections_become_attach_and_detach() {
        let s = Selection { ports: vec![5201], addrs: vec!["10.0.0.0/8".into()], ..Selection::default() };
        let a = to_attach(&s).unwrap();
        assert_eq!(a.existing.as_ref().unwrap().ports, vec![5201]);
        assert_eq!(a.new_flows.ports, vec![5201]);
        let d = to_detach(&s).unwrap();
        assert!(d.filter.is_some());
        // Detaching everything is the empty selection.
        assert!(to_detach(&Selection::default()).unwrap().filter.is_none());
    }

    #[test]
    fn bad_input_is_an_error_naming_it() {
        let s = Selection { addrs: vec!["10.0.0/99".into()], ..Selection::default() };
        assert!(to_attach(&s).is_err());
        let s = Selection { set_default: true, ..Selection::default() };
        assert!(to_detach(&s).unwrap_err().contains("attach only"));
        assert!(serde_json::from_value::<Selection>(serde_json::json!({"prots": [1]})).is_err());
    }
}
