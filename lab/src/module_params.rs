//! Parameters of the kernel's congestion control modules set for one run and put back after it:
//! a scheme that varies the kernel's own implementation (Cubic's HyStart with only its delay
//! test, `tcp_cubic.hystart_detect = 2`) as an ablation beside ours.
//!
//! Unlike `net.` sysctls these are global, not per namespace: while such a run lasts, every
//! socket on the machine using that module sees the value. So only `tcp_*` modules are accepted,
//! the old value is restored when the run ends however it ends (drop), and runs of ccp-lab that
//! overlap must not both set one.

use std::path::PathBuf;

use crate::error::{Error, Result};

/// Checks `key` (`module.parameter`, a `tcp_*` module) and renders `v` as the value to write.
pub fn param_value(key: &str, v: &toml::Value) -> std::result::Result<String, String> {
    let word = |s: &str| !s.is_empty() && s.len() < 64 && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    let ok_key = match key.split_once('.') {
        Some((module, param)) => module.starts_with("tcp_") && word(module) && word(param),
        None => false,
    };
    if !ok_key {
        return Err(format!(
            "{key:?} is not a congestion control module's parameter (tcp_<module>.<parameter>, e.g. tcp_cubic.hystart_detect)"
        ));
    }
    match v {
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Boolean(b) => Ok(if *b { "1" } else { "0" }.to_string()),
        toml::Value::String(s) if !s.is_empty() && !s.contains('\n') => Ok(s.clone()),
        _ => Err(format!("{key}: give an integer, a boolean or a one-line string")),
    }
}

fn param_path(key: &str) -> PathBuf {
    let (module, param) = key.split_once('.').unwrap_or((key, ""));
    PathBuf::from(format!("/sys/module/{module}/parameters/{param}"))
}

/// Module parameters set for one run, restored (in reverse order) on [`ModuleParams::restore`]
/// or drop.
#[derive(Debug, Default)]
pub struct ModuleParams {
    /// (key, previous value)
    set: Vec<(String, String)>,
}

impl ModuleParams {
    /// Sets `key = value`, remembering the old value. A module that is not loaded (or a
    /// parameter it does not have) is an error naming the file.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let path = param_path(key);
        let old = std::fs::read_to_string(&path)
            .map_err(|e| Error::io(format!("reading {} (is the module loaded, with that parameter?)", path.display()), e))?;
        std::fs::write(&path, value).map_err(|e| Error::io(format!("setting {key} = {value:?} ({})", path.display()), e))?;
        self.set.push((key.to_string(), old.trim().to_string()));
        Ok(())
    }

    /// Puts every value back.
    pub fn restore(&mut self) {
        while let Some((key, old)) = self.set.pop() {
            if let Err(e) = std::fs::write(param_path(&key), &old) {
                eprintln!("ccp-lab: restoring {key} = {old:?}: {e}");
            }
        }
    }
}

impl Drop for ModuleParams {
    fn drop(&mut self) {
        self.restore();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_congestion_control_modules_parameters_are_accepted() {
        assert_eq!(param_value("tcp_cubic.hystart_detect", &toml::Value::Integer(2)), Ok("2".into()));
        assert_eq!(param_value("tcp_cubic.hystart", &toml::Value::Boolean(false)), Ok("0".into()));
        assert_eq!(param_path("tcp_cubic.hystart_detect"), PathBuf::from("/sys/module/tcp_cubic/parameters/hystart_detect"));
        for bad in ["kvm.nx_huge_pages", "tcp_cubic", "tcp_cubic.", "tcp_cubic.a/../b", "tcp_cubic.x.y", "tcp_.x/y"] {
            assert!(param_value(bad, &toml::Value::Integer(1)).is_err(), "{bad}");
        }
        assert!(param_value("tcp_cubic.beta", &toml::Value::Float(0.7)).is_err());
        assert!(param_value("tcp_cubic.beta", &toml::Value::String("7\n17".into())).is_err());
    }

    /// Sets a real parameter and checks it is back after the guard goes (root only: the files
    /// are root's to write).
    #[test]
    fn a_parameter_is_restored_when_the_run_ends() {
        let key = "tcp_cubic.hystart_low_window";
        let Ok(before) = std::fs::read_to_string(param_path(key)) else {
            eprintln!("SKIPPED: tcp_cubic's parameters are not in /sys/module on this kernel");
            return;
        };
        if !crate::netns::have_privileges() {
            eprintln!("SKIPPED: setting module parameters needs root");
            return;
        }
        let want = if before.trim() == "17" { "18" } else { "17" };
        {
            let mut p = ModuleParams::default();
            p.set(key, want).unwrap();
            assert_eq!(std::fs::read_to_string(param_path(key)).unwrap().trim(), want);
        }
        assert_eq!(std::fs::read_to_string(param_path(key)).unwrap(), before);
        let mut p = ModuleParams::default();
        let e = p.set("tcp_nosuchmodule.x", "1").unwrap_err().to_string();
        assert!(e.contains("/sys/module/tcp_nosuchmodule/parameters/x"), "{e}");
    }
}
