//! The driver against a fake engine: a bash script (needs `bash`, `sed`, `cut` and
//! `sha256sum`, coreutils) that speaks the serial protocol on its stdio like a guest behind
//! an engine's 8250 would.

use super::*;

/// The guest memory every fake launch is for: 256 MiB.
fn mem() -> GuestMem {
    GuestMem::from_mib(256).unwrap()
}
use crate::Launch;
use std::path::PathBuf;
use truecold_proto::{BootId, ErrorCode, GuestPlatform, GuestRecord, Message, Workload};

const ID: &str = "0000002a-1111-4222-8333-444444444444";

const SCRIPT: &str = r#"
mode=$1
echo "engine noise before the guest"
echo "engine log on stderr" >&2
[ "$mode" = exit-early ] && exit 3
echo "TC1 ready boot_id=$ID"
[ "$mode" = hang ] && exec sleep 1000
read -r line
hex=${line#TC1 nonce value=}
esc=$(printf '%s' "$hex" | sed 's/../\\x&/g')
b=$( { printf 'truecold-liveness-v1\x00'; printf "$esc"; printf '%s' "$ID"; } | sha256sum | cut -d' ' -f1)
[ "$mode" = bad-reply ] && b=0000000000000000000000000000000000000000000000000000000000000000
echo "TC1 reply boot_id=$ID binding=$b"
echo "$RECORD"
[ "$mode" = reboot ] && exec sleep 1000
exit 0
"#;

fn record() -> String {
    Message::Record(GuestRecord {
        boot_id: BootId::parse(ID),
        t_init_ns: 1,
        t_ready_ns: 2,
        t_reply_ns: 3,
        t_record_ns: 4,
        mem_configured: 1 << 28,
        mem_firmware_ram: 1 << 28,
        mem_total: 250 << 20,
        mem_present: (1 << 28) - 4096,
        mem_managed: 250 << 20,
        mem_probe: 1 << 20,
        cpus: 1,
        platform: GuestPlatform {
            packages: 1,
            cores_per_package: 1,
            threads_per_core: 1,
            tsc_deadline_timer: true,
            constant_tsc: true,
            nonstop_tsc: true,
            tsc_unstable: false,
            clocksource: None,
        },
        workload: Workload::BenchOk,
        code: ErrorCode::Ok,
    })
    .encode()
    .trim_end()
    .to_string()
}

fn fake(engine: Engine, mode: &str, dir: &std::path::Path) -> Launch {
    let script = dir.join("engine.sh");
    let body = format!("ID={ID}\nRECORD='{}'\n{SCRIPT}", record());
    Launch {
        engine,
        program: PathBuf::from("bash"),
        args: vec![script.to_string_lossy().into_owned(), mode.into()],
        files: vec![(script, body.into_bytes())],
        report_file: None,
        per_sample_stamps: false,
        agent: None,
        ram_layout: truecold_proto::kinds::RamLayout::ABSENT,
    }
}

const S: u64 = 1_000_000_000;

#[test]
fn a_clean_run_is_observed_in_order() {
    let d = tempfile::tempdir().unwrap();
    let r = launch_once(&fake(Engine::Firecracker, "ok", d.path()), mem(), 60 * S, S);
    assert_eq!(r.end, ProcessEnd::Exited(0), "{}", r.stderr_tail);
    let s = r.run.stamps;
    let (req, sr, st, rec, reaped) = (
        s.request.unwrap(),
        s.serial_ready.unwrap(),
        s.strict_ready.unwrap(),
        s.record.unwrap(),
        s.reaped.unwrap(),
    );
    assert!(req < sr && sr <= st && st <= rec && rec <= reaped, "{s:?}");
    assert!(r.run.liveness.verified);
    assert_eq!(
        r.run.ready_boot_id.map(|b| b.to_string()).as_deref(),
        Some(ID)
    );
    assert!(r.run.guest_record.is_some());
    assert_eq!(r.run.protocol_error_count, 0, "{:?}", r.run.protocol_errors);
    assert!(r.run.outcome.ok, "{:?}", r.run.outcome);
    assert_eq!(r.noise_lines, 1);
    assert!(r.stderr_tail.contains("engine log on stderr"));
    assert_eq!(
        r.run.exit,
        Some(truecold_proto::report::ProcessExit {
            code: Some(0),
            signal: None,
            killed: false
        })
    );
    // bash's own memory is no 256 MiB guest: a typed mismatch, kept.
    assert!(r.run.host_memory.is_none());
    assert!(
        r.mapping_error
            .as_deref()
            .is_some_and(|m| m.contains("268435456")),
        "{:?}",
        r.mapping_error
    );
    assert_eq!(r.argv[0], "bash");
}

#[test]
fn an_engine_that_reboots_is_killed_after_the_record() {
    let d = tempfile::tempdir().unwrap();
    let r = launch_once(
        &fake(Engine::CloudHypervisor, "reboot", d.path()),
        mem(),
        60 * S,
        S,
    );
    assert_eq!(r.end, ProcessEnd::KilledAfterRecord);
    assert!(r.run.exit.is_some_and(|e| e.killed));
    assert!(
        r.run.stamps.record.is_some() && r.run.outcome.ok,
        "{:?}",
        r.run.outcome
    );
}

#[test]
fn a_hung_guest_is_killed_at_the_deadline_never_waited_for() {
    let d = tempfile::tempdir().unwrap();
    let r = launch_once(
        &fake(Engine::QemuMicrovm, "hang", d.path()),
        mem(),
        S / 5,
        S / 10,
    );
    assert_eq!(r.end, ProcessEnd::KilledAtDeadline);
    assert!(r.run.stamps.serial_ready.is_some());
    assert!(r.run.stamps.strict_ready.is_none());
    assert_eq!(r.run.outcome.failure_kind.as_deref(), Some("deadline"));
    assert!(r.reaped_ns >= r.deadline_at_ns);
}

#[test]
fn a_bad_reply_and_an_early_exit() {
    let d = tempfile::tempdir().unwrap();
    let r = launch_once(
        &fake(Engine::Firecracker, "bad-reply", d.path()),
        mem(),
        60 * S,
        S,
    );
    assert!(!r.run.liveness.verified);
    assert_eq!(r.run.protocol_error_count, 1);
    assert_eq!(
        r.run.outcome.failure_kind.as_deref(),
        Some("no_strict_ready")
    );
    let r = launch_once(
        &fake(Engine::Firecracker, "exit-early", d.path()),
        mem(),
        60 * S,
        S,
    );
    assert_eq!(r.end, ProcessEnd::Exited(3));
    assert!(r.run.stamps.serial_ready.is_none());
}

#[test]
fn a_missing_binary_is_a_spawn_failure() {
    let l = Launch {
        engine: Engine::Firecracker,
        program: PathBuf::from("/nonexistent/firecracker"),
        args: vec![],
        files: vec![],
        report_file: None,
        per_sample_stamps: false,
        agent: None,
        ram_layout: truecold_proto::kinds::RamLayout::ABSENT,
    };
    let r = launch_once(&l, mem(), S, S);
    assert!(matches!(r.end, ProcessEnd::SpawnFailed(ref m) if m.contains("/nonexistent")));
    assert_eq!(r.run.exit, None);
    assert_eq!(r.run.outcome.failure_kind.as_deref(), Some("spawn_failed"));
}

#[test]
fn truecold_marks_are_merged_from_its_report_file() {
    let d = tempfile::tempdir().unwrap();
    let report = d.path().join("report.json");
    // The fake "VMM" writes a report echoing the request it was given.
    let mut l = fake(Engine::Truecold, "ok", d.path());
    let (script, body) = l.files[0].clone();
    let body = String::from_utf8(body).unwrap().replacen(
        "mode=$1\n",
        &format!(
            "mode=$1\nreq=$3\nprintf '{{\"schema\":{},\"error\":{{\"kind\":\"x\",\"message\":\"%s\"}}}}' \"$req\" > {}\n",
            truecold_proto::report::REPORT_SCHEMA,
            report.display()
        ),
        1,
    );
    l.files = vec![(script, body.into_bytes())];
    l.report_file = Some(report);
    l.per_sample_stamps = true;
    let r = launch_once(&l, mem(), 60 * S, S);
    assert_eq!(r.argv[3], crate::REQUEST_FLAG);
    assert_eq!(r.argv[4], r.request_ns.to_string());
    assert_eq!(r.argv[6], r.deadline_at_ns.to_string());
    // An error report is kept whole and said to be one.
    assert!(r.run.vmm.is_some());
    assert!(
        r.report_error
            .as_deref()
            .is_some_and(|e| e.contains("before its guest ran")),
        "{:?}",
        r.report_error
    );
}

/// A guest behind a hybrid vsock, played by python3 (scripts/deps.sh installs it): listens on
/// TCP first, connects to the agent socket, speaks the TC1 lines there, answers the network
/// proof, sends the record on the agent channel, exits.
const AGENT_GUEST: &str = r#"
import hashlib, socket, sys
uds, port, boot, record, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
def bind(h, nonce, b=boot):
    return hashlib.sha256(b"truecold-liveness-v1\x00" + bytes.fromhex(nonce) + b.encode()).hexdigest()
def line(f):
    return f.readline().decode().strip()
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port)); srv.listen(1)
a = socket.socket(socket.AF_UNIX); a.connect(uds); af = a.makefile("rb")
print("console noise")
a.sendall(("TC1 ready boot_id=%s\n" % boot).encode())
n = line(af).split("value=")[1]
a.sendall(("TC1 reply boot_id=%s binding=%s\n" % (boot, bind(boot, n))).encode())
if mode != "no-listener":
    c, _ = srv.accept(); cf = c.makefile("rb")
    n2 = line(cf).split("value=")[1]
    if mode == "bad-tcp":
        n2 = "00" * 16
    c.sendall(("TC1 reply boot_id=%s binding=%s\n" % (boot, bind(boot, n2))).encode())
    c.close()
a.sendall((record + "\n").encode())
a.close()
"#;

fn agent_fake(mode: &str, dir: &std::path::Path) -> Launch {
    let script = dir.join("guest.py");
    let listen = dir.join("v.sock_1024");
    // A free port: bind, note, release (the guest binds it right after).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut args = vec![
        script.to_string_lossy().into_owned(),
        listen.to_string_lossy().into_owned(),
        port.to_string(),
        ID.into(),
        record(),
        mode.into(),
    ];
    if mode == "no-listener" {
        // The guest listens on another port than the one the bench proves.
        args[2] = "0".into();
    }
    Launch {
        engine: Engine::Truecold,
        program: PathBuf::from("python3"),
        args,
        files: vec![(script, AGENT_GUEST.as_bytes().to_vec())],
        report_file: None,
        per_sample_stamps: false,
        agent: Some(crate::Agent {
            listen,
            tcp: std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, port),
        }),
        ram_layout: truecold_proto::kinds::RamLayout::ABSENT,
    }
}

#[test]
fn the_agent_channel_and_the_network_proof_make_strict_ready() {
    let d = tempfile::tempdir().unwrap();
    let r = launch_once(&agent_fake("ok", d.path()), mem(), 60 * S, S);
    assert_eq!(r.end, ProcessEnd::Exited(0), "{}", r.stderr_tail);
    assert!(r.run.outcome.ok, "{:?} {}", r.run.outcome, r.stderr_tail);
    let s = r.run.stamps;
    let (req, sr, st, rec) = (
        s.request.unwrap(),
        s.serial_ready.unwrap(),
        s.strict_ready.unwrap(),
        s.record.unwrap(),
    );
    assert!(req < sr && sr <= st && st <= rec, "{s:?}");
    assert!(r.run.liveness.verified);
    let p = r.run.network.as_ref().unwrap();
    assert!(p.liveness.verified && p.error.is_none(), "{p:?}");
    // Two challenges, two nonces.
    assert_ne!(p.liveness.nonce, r.run.liveness.nonce);
    // The engine's stdout is console noise under the agent channel, never observed.
    assert!(r.stderr_tail.contains("console noise"), "{}", r.stderr_tail);
    assert_eq!(r.run.protocol_error_count, 0);
    // The listening socket is gone after the launch.
    assert!(!d.path().join("v.sock_1024").exists());
}

#[test]
fn a_network_proof_that_fails_is_network_not_ready_never_strict_ready() {
    for mode in ["bad-tcp", "no-listener"] {
        let d = tempfile::tempdir().unwrap();
        let r = launch_once(&agent_fake(mode, d.path()), mem(), 60 * S, S);
        assert!(r.run.liveness.verified, "{mode}: the agent answered");
        assert!(r.run.stamps.strict_ready.is_none(), "{mode}");
        assert_eq!(
            r.run.outcome.failure_kind.as_deref(),
            Some("network_not_ready"),
            "{mode}: {:?}",
            r.run.outcome
        );
        assert!(r.run.network.as_ref().is_some_and(|p| p.error.is_some()));
    }
}

#[test]
fn an_agent_socket_that_cannot_be_made_is_a_spawn_failure() {
    let d = tempfile::tempdir().unwrap();
    let mut l = agent_fake("ok", d.path());
    l.agent.as_mut().unwrap().listen = d.path().join("no-such-dir/v.sock_1024");
    let r = launch_once(&l, mem(), 60 * S, S);
    assert!(
        matches!(r.end, ProcessEnd::SpawnFailed(ref m) if m.contains("listening on")),
        "{:?}",
        r.end
    );
}
