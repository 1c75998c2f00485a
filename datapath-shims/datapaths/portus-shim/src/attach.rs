//! `attach` and `detach`: ccp-ebpf's machinery (iter/tcp per namespace, sockops per cgroup,
//! namespace defaults, a state file), pointed at this shim's congestion control and pins, and
//! reported as `ccp-agent attach` reports it.

use ccp_ebpf::attach::{AttachReport, Attacher};

use crate::cli::{InstanceAttachArgs, InstanceDetachArgs};

pub fn attach(args: &InstanceAttachArgs) -> anyhow::Result<()> {
    let attacher = Attacher::from_pins(args.instance.attach_settings());
    AttachReport::from(&attacher.attach(&args.selection.attach())?).print("attach").map_err(anyhow::Error::msg)
}

pub fn detach(args: &InstanceDetachArgs) -> anyhow::Result<()> {
    let attacher = Attacher::from_pins(args.instance.attach_settings());
    AttachReport::from(&attacher.detach(&args.selection.detach())?).print("detach").map_err(anyhow::Error::msg)
}
