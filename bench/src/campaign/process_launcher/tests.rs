use super::*;
use std::io::Write;

fn script(dir: &tempfile::TempDir, name: &str, body: &str) -> PathBuf {
    let p = dir.path().join(name);
    let mut f = std::fs::File::create(&p).unwrap();
    writeln!(f, "#!/bin/sh\n{body}").unwrap();
    drop(f);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn launcher(program: PathBuf, deadline_ms: u64) -> ProcessLauncher {
    ProcessLauncher {
        command: VmmCommand {
            program,
            args: vec!["boot".into(), "--probe".into()],
        },
        deadline_ns: deadline_ms * 1_000_000,
        kill_grace_ns: 0,
        from_intended: false,
    }
}

fn slot(index: u64) -> Slot {
    Slot {
        index,
        level: 1,
        intended_ns: now_ns(),
    }
}

#[test]
fn passes_request_stamp_and_keeps_stdout() {
    let d = tempfile::tempdir().unwrap();
    let p = script(&d, "vmm", r#"echo "$@"; echo oops >&2; exit 0"#);
    let a = launcher(p, 10_000).launch(slot(7));
    assert_eq!(a.end, End::Exited(0));
    assert_eq!(a.slot.index, 7);
    let out = String::from_utf8(a.stdout).unwrap();
    let words: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(words[0..2], ["boot", "--probe"]);
    assert_eq!(words[2], "--request-ns");
    assert_eq!(words[3], a.request_ns.to_string());
    assert_eq!(words[4], "--deadline-at-ns");
    // The instant: the request stamp + the deadline, exactly (closed loop: the origin is
    // the request stamp).
    let at: u64 = words[5].parse().unwrap();
    assert_eq!(at, a.request_ns + 10_000_000_000);
    assert_eq!(words.len(), 6);
    assert_eq!(a.stderr_tail, "oops\n");
    assert!(a.request_ns >= a.slot.intended_ns);
    assert!(a.reaped_ns >= a.request_ns);
    assert!(!a.stdout_truncated);
}

#[test]
fn child_past_its_deadline_is_killed_and_kept() {
    let d = tempfile::tempdir().unwrap();
    let p = script(&d, "vmm", "echo started; exec sleep 60");
    let a = launcher(p, 150).launch(slot(0));
    assert_eq!(a.end, End::KilledAtDeadline);
    assert_eq!(String::from_utf8(a.stdout).unwrap(), "started\n");
    // Killed at the instant it was given (request stamp + deadline, no grace here).
    assert!(a.reaped_ns - a.request_ns >= 150_000_000);
}

#[test]
fn exit_codes_signals_and_spawn_failures_are_typed() {
    let d = tempfile::tempdir().unwrap();
    let p = script(&d, "fail", "echo 'error: no kvm' >&2; exit 3");
    let a = launcher(p, 10_000).launch(slot(1));
    assert_eq!(a.end, End::Exited(3));
    assert_eq!(a.stderr_tail, "error: no kvm\n");

    let p = script(&d, "crash", "kill -SEGV $$");
    let a = launcher(p, 10_000).launch(slot(2));
    assert_eq!(a.end, End::Signalled(libc::SIGSEGV));

    let a = launcher(d.path().join("does-not-exist"), 10_000).launch(slot(3));
    match &a.end {
        End::SpawnFailed(msg) => assert!(msg.contains("does-not-exist"), "{msg}"),
        other => panic!("{other:?}"),
    }
    assert!(a.reaped_ns >= a.request_ns);
}

#[test]
fn stderr_keeps_only_its_tail_and_stdout_is_bounded() {
    let d = tempfile::tempdir().unwrap();
    let p = script(
        &d,
        "loud",
        "head -c 100000 /dev/zero | tr '\\0' a >&2; printf END >&2; \
         head -c 1100000 /dev/zero | tr '\\0' b",
    );
    let a = launcher(p, 20_000).launch(slot(0));
    assert_eq!(a.end, End::Exited(0));
    assert_eq!(a.stderr_tail.len(), MAX_STDERR_TAIL);
    assert!(a.stderr_tail.ends_with("aaEND"));
    assert!(a.stdout_truncated);
    assert_eq!(a.stdout.len(), MAX_STDOUT);
}

#[test]
fn command_display_quotes_what_needs_it() {
    let c = VmmCommand {
        program: "/x/truecold-vmm".into(),
        args: vec![
            "--cmdline-extra".into(),
            "quiet a=b c".into(),
            "it's".into(),
        ],
    };
    assert_eq!(
        c.display(2_000_000_000, false),
        "/x/truecold-vmm --cmdline-extra 'quiet a=b c' 'it'\\''s' \
         --request-ns <actual_request_ns> --deadline-at-ns <actual_request_ns+2000000000>"
    );
    assert!(c
        .display(5, true)
        .ends_with("--deadline-at-ns <intended_request_ns+5>"));
}

#[test]
fn deadline_runs_from_the_intended_time_when_there_is_one() {
    let d = tempfile::tempdir().unwrap();
    let p = script(&d, "vmm", r#"echo "$@""#);
    let mut l = launcher(p, 10_000);
    l.from_intended = true;
    // Due 4 s ago: the instant is the intended time + 10 s, 6 s after the request.
    let due = now_ns() - 4_000_000_000;
    let a = l.launch(Slot {
        index: 0,
        level: 0,
        intended_ns: due,
    });
    let out = String::from_utf8(a.stdout).unwrap();
    let at: u64 = out.split_whitespace().nth(5).unwrap().parse().unwrap();
    assert_eq!(at, due + 10_000_000_000);
    assert!(at - a.request_ns <= 6_000_000_000);
    // Not yet due (a closed loop's slot in the future): the origin is the request stamp.
    let d2 = tempfile::tempdir().unwrap();
    let mut l = launcher(script(&d2, "vmm", r#"echo "$@""#), 10_000);
    l.from_intended = true;
    let a = l.launch(Slot {
        index: 1,
        level: 0,
        intended_ns: now_ns() + 60_000_000_000,
    });
    let out = String::from_utf8(a.stdout).unwrap();
    let at: u64 = out.split_whitespace().nth(5).unwrap().parse().unwrap();
    assert_eq!(at, a.request_ns + 10_000_000_000);

    // An instant already past (+ grace): the kill comes at once, it does not wait a
    // deadline counted from the spawn.
    let d3 = tempfile::tempdir().unwrap();
    let mut l = launcher(script(&d3, "vmm", r#"echo "$@"; exec sleep 60"#), 10_000);
    l.from_intended = true;
    l.kill_grace_ns = 100_000_000;
    let due = now_ns() - 20_000_000_000;
    let a = l.launch(Slot {
        index: 2,
        level: 0,
        intended_ns: due,
    });
    assert_eq!(a.end, End::KilledAtDeadline);
    assert!(a.reaped_ns - a.request_ns < 5_000_000_000, "killed at once");
}

#[test]
fn shell_quote_leaves_safe_words_and_quotes_the_rest() {
    assert_eq!(shell_quote("--mem-mib=16384"), "--mem-mib=16384");
    assert_eq!(
        shell_quote("/usr/bin/truecold-vmm"),
        "/usr/bin/truecold-vmm"
    );
    assert_eq!(shell_quote(""), "''");
    assert_eq!(shell_quote("a b"), "'a b'");
    assert_eq!(shell_quote("$HOME;rm"), "'$HOME;rm'");
    assert_eq!(shell_quote("it's"), r"'it'\''s'");
}
