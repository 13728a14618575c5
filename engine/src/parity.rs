//! One engine's launch under the parity contract (docs/parity.md), purely: what each launch
//! adds to the arm's strict launch ([`crate::launch`]) — the hybrid vsock's socket in the
//! launch's run directory, the launch's tap and network pair, its workspace clone — and
//! where the bench meets the guest's agent ([`Agent`]).
//!
//! - truecold-vmm: `--transport vsock --vsock-uds <run>/v.sock --tap <tap> --net-pair <pair>
//!   --workspace <image>`; it creates the tap itself and builds the guest's command line.
//! - Firecracker v1.16.1: its config gains `vsock {guest_cid, uds_path}`,
//!   `network-interfaces [{iface_id, host_dev_name, guest_mac}]` and `drives [{drive_id,
//!   path_on_host, is_root_device: false}]`; it opens an existing tap only, so the bench
//!   makes the tap ([`tap_by_harness`]) inside the measured window, before the spawn.
//! - Cloud Hypervisor v53.0: `--vsock cid=3,socket=<run>/v.sock --net
//!   tap=<tap>,ip=<host>,mask=<mask>,mac=<mac> --disk path=<image>,image_type=raw`; it
//!   creates, addresses and brings up the tap itself; its devices are PCI functions, so its
//!   guest's PCI bus is probed ([`truecold_proto::boot_cmdline::agent_cmdline`]).
//! - QEMU's microvm: no parity launch ([`ParityUnsupported`]): its vsock device is
//!   vhost-vsock only, which needs the host's `/dev/vhost-vsock`.
//!
//! Every engine connects a guest connection to host port P to `<uds>_<P>` (Firecracker's
//! convention, which Cloud Hypervisor's muxer shares), so the agent's listener is the same.

use crate::{cloud_hypervisor, firecracker, utf8, Agent, EngineError, Guest, Launch, PerLaunch};
use std::net::SocketAddrV4;
use truecold_proto::kinds::Engine;
use truecold_proto::parity::{uds_port_path, NetPair, AGENT_PORT, TCP_PORT};

/// An engine without a parity launch ([`Engine::no_parity_launch`]: QEMU's microvm).
#[derive(Debug, thiserror::Error)]
#[error("{why}")]
pub struct ParityUnsupported {
    pub engine: Engine,
    pub why: &'static str,
}

/// Whether `engine` can run the parity contract.
pub fn supported(engine: Engine) -> Result<(), ParityUnsupported> {
    match engine.no_parity_launch() {
        Some(why) => Err(ParityUnsupported { engine, why }),
        None => Ok(()),
    }
}

/// Whether the bench makes the launch's tap (persistent, addressed and up, after the request
/// stamp and before the spawn; removed after the reap): Firecracker opens an existing tap
/// only. truecold-vmm and Cloud Hypervisor create their own, gone with them.
pub fn tap_by_harness(engine: Engine) -> bool {
    engine == Engine::Firecracker
}

/// The guest kernel command line of an engine's parity launch: a peer's
/// ([`truecold_proto::boot_cmdline::agent_cmdline`]), or the one truecold-vmm builds from
/// its flags ([`truecold_proto::boot_cmdline::vmm_agent_cmdline`]).
pub fn cmdline(engine: Engine, g: &Guest, pair: NetPair) -> Result<String, EngineError> {
    match engine {
        Engine::Truecold => truecold_proto::boot_cmdline::vmm_agent_cmdline(
            g.mem,
            pair,
            g.layout_of(engine),
            &g.cmdline_extra,
        ),
        _ => truecold_proto::boot_cmdline::agent_cmdline(engine, g.mem, pair, &g.cmdline_extra),
    }
    .map_err(EngineError::Cmdline)
}

/// Launch `p` of the arm whose strict launch is `base` (for `g`): see the module's list.
pub fn launch(base: &Launch, g: &Guest, p: &PerLaunch<'_>) -> Result<Launch, EngineError> {
    let e = base.engine;
    let uds = utf8(e, "the vsock socket path", &p.vsock_uds())?;
    let image = utf8(e, "the workspace clone path", &p.image())?;
    let mut l = Launch {
        agent: Some(Agent {
            listen: uds_port_path(&p.vsock_uds(), AGENT_PORT),
            tcp: SocketAddrV4::new(p.pair.guest(), TCP_PORT),
        }),
        ..base.clone()
    };
    match e {
        Engine::Truecold => {
            set_flag(&mut l.args, e, "--transport", "vsock")?;
            for (k, v) in [
                ("--vsock-uds", uds),
                ("--tap", p.tap.to_string()),
                ("--net-pair", p.pair.to_string()),
                ("--workspace", image),
            ] {
                l.args.push(k.into());
                l.args.push(v);
            }
        }
        Engine::Firecracker => {
            let config = firecracker::parity_config(g, &cmdline(e, g, p.pair)?, &uds, p, &image)?;
            match l
                .files
                .iter_mut()
                .find(|(f, _)| f.file_name().is_some_and(|n| n == firecracker::CONFIG_FILE))
            {
                Some((_, data)) => *data = config.into_bytes(),
                None => return Err(EngineError::NoConfigFile(e)),
            }
        }
        Engine::CloudHypervisor => {
            set_flag(&mut l.args, e, "--cmdline", &cmdline(e, g, p.pair)?)?;
            l.args
                .extend(cloud_hypervisor::parity_args(&uds, p, &image));
        }
        Engine::QemuMicrovm => {
            supported(e).map_err(EngineError::Parity)?;
        }
    }
    Ok(l)
}

/// Sets the value after `flag` in the arm's argv (which must have it).
fn set_flag(
    args: &mut [String],
    e: Engine,
    flag: &'static str,
    value: &str,
) -> Result<(), EngineError> {
    match args.iter().position(|a| a == flag).map(|i| i + 1) {
        Some(i) if i < args.len() => {
            args[i] = value.to_string();
            Ok(())
        }
        _ => Err(EngineError::NoFlag { engine: e, flag }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GuestMem;
    use std::path::{Path, PathBuf};
    use truecold_proto::kinds::{Backing, HostKind};

    fn guest() -> Guest {
        Guest {
            kernel: "/g/parity/vmlinux".into(),
            initramfs: "/g/initramfs.cpio".into(),
            vcpus: 2,
            mem: GuestMem::from_mib(1024).unwrap(),
            backing: Backing::Anon,
            cmdline_extra: String::new(),
            ram_layout: truecold_proto::kinds::RamLayout::ABSENT,
        }
    }

    /// The arm's strict launch of `e` (work directory `/w`).
    fn base_launch(e: Engine, g: &Guest) -> Launch {
        crate::launch(
            e,
            Path::new("/bin/x"),
            g,
            Path::new("/w"),
            HostKind::NestedEmulated,
        )
        .unwrap()
    }

    fn per_launch(dir: &Path) -> PerLaunch<'_> {
        PerLaunch {
            run_dir: dir,
            tap: "tc1x0",
            pair: NetPair::for_slot(0).unwrap(),
        }
    }

    #[test]
    fn every_engine_but_qemu_has_a_parity_launch_with_one_agent_socket() {
        let g = guest();
        let dir = Path::new("/w/launches/0");
        for e in Engine::ALL {
            let base = base_launch(e, &g);
            let l = launch(&base, &g, &per_launch(dir));
            if e == Engine::QemuMicrovm {
                assert!(supported(e).is_err());
                assert!(matches!(l, Err(EngineError::Parity(_))), "{e}");
                continue;
            }
            let l = l.unwrap();
            let a = l.agent.as_ref().unwrap();
            assert_eq!(a.listen, Path::new("/w/launches/0/v.sock_1024"), "{e}");
            assert_eq!(a.tcp.to_string(), "10.200.0.2:7070");
            assert_eq!(
                per_launch(dir).sockets(),
                vec![
                    PathBuf::from("/w/launches/0/v.sock_1024"),
                    PathBuf::from("/w/launches/0/v.sock")
                ]
            );
        }
    }

    #[test]
    fn truecold_gets_its_flags() {
        let g = guest();
        let base = base_launch(Engine::Truecold, &g);
        let l = launch(&base, &g, &per_launch(Path::new("/r"))).unwrap();
        let s = l.args.join(" ");
        assert!(s.contains("--transport vsock"), "{s}");
        assert!(!s.contains("--transport serial"), "{s}");
        assert!(s.ends_with(
            "--vsock-uds /r/v.sock --tap tc1x0 --net-pair 10.200.0.1,10.200.0.2 \
             --workspace /r/workspace.img"
        ));
    }

    #[test]
    fn firecracker_config_has_the_devices_and_the_agent_command_line() {
        let g = guest();
        let base = base_launch(Engine::Firecracker, &g);
        let l = launch(&base, &g, &per_launch(Path::new("/r"))).unwrap();
        assert_eq!(l.args, base.args);
        let (path, data) = &l.files[0];
        assert_eq!(path, Path::new("/w/firecracker-config.json"));
        let v: serde_json::Value = serde_json::from_slice(data).unwrap();
        assert_eq!(v["vsock"]["guest_cid"], 3);
        assert_eq!(v["vsock"]["uds_path"], "/r/v.sock");
        assert_eq!(v["network-interfaces"][0]["host_dev_name"], "tc1x0");
        assert_eq!(v["network-interfaces"][0]["guest_mac"], "02:74:0a:c8:00:02");
        assert_eq!(v["drives"][0]["path_on_host"], "/r/workspace.img");
        assert_eq!(v["drives"][0]["is_root_device"], false);
        let boot = v["boot-source"]["boot_args"].as_str().unwrap();
        assert!(boot.contains(" pci=off "), "{boot}");
        assert!(boot.contains("8250.nr_uarts=0"), "{boot}");
        assert!(boot.ends_with(
            "truecold.net=eth0,10.200.0.2/30 truecold.workspace=1 truecold.transport=vsock \
             truecold.engine=firecracker"
        ));
        assert_eq!(v["boot-source"]["kernel_image_path"], "/g/parity/vmlinux");
        assert!(tap_by_harness(Engine::Firecracker));
    }

    #[test]
    fn cloud_hypervisor_gets_its_devices_and_a_probed_pci_bus() {
        let g = guest();
        let base = base_launch(Engine::CloudHypervisor, &g);
        let l = launch(&base, &g, &per_launch(Path::new("/r"))).unwrap();
        let s = l.args.join(" ");
        assert!(
            s.ends_with(
                "--vsock cid=3,socket=/r/v.sock \
                 --net tap=tc1x0,ip=10.200.0.1,mask=255.255.255.252,mac=02:74:0a:c8:00:02 \
                 --disk path=/r/workspace.img,image_type=raw"
            ),
            "{s}"
        );
        let i = l.args.iter().position(|a| a == "--cmdline").unwrap();
        let c = &l.args[i + 1];
        assert!(!c.contains("pci=off"), "{c}");
        assert!(c.contains("truecold.engine=cloud-hypervisor"), "{c}");
        assert!(!tap_by_harness(Engine::CloudHypervisor));
    }
}
