use super::*;
use std::os::unix::net::UnixListener;
use std::process::{Command, Stdio};

/// The env var that makes [`live_scenarios`] run (in a process of its own).
const LIVE: &str = "TRUECOLD_PARITY_CLEANUP_LIVE";
const LIVE_TEST: &str = "parity::cleanup::tests::live_scenarios";

fn names(o: &CleanupOutcome) -> Vec<&'static str> {
    o.failures.iter().map(CleanupFailure::name).collect()
}

#[test]
fn counts_are_judged_only_when_they_grew_and_were_read() {
    let b = HarnessCounts {
        fds: Some(10),
        threads: Some(3),
        maps: Some(200),
    };
    assert_eq!(judge_counts(&b, &b), vec![]);
    let fewer = HarnessCounts {
        fds: Some(9),
        threads: Some(2),
        maps: Some(150),
    };
    assert_eq!(judge_counts(&b, &fewer), vec![]);
    let more = HarnessCounts {
        fds: Some(11),
        threads: Some(4),
        maps: Some(201),
    };
    assert_eq!(
        judge_counts(&b, &more),
        vec![
            CleanupFailure::FdsLeaked {
                before: 10,
                after: 11
            },
            CleanupFailure::ThreadsLeaked {
                before: 3,
                after: 4
            },
            CleanupFailure::MapsLeaked {
                before: 200,
                after: 201
            },
        ]
    );
    assert_eq!(judge_counts(&HarnessCounts::default(), &more), vec![]);
    assert_eq!(judge_counts(&b, &HarnessCounts::default()), vec![]);
}

#[test]
fn counts_read_now_are_readable() {
    let c = HarnessCounts::now();
    assert!(c.fds.is_some_and(|n| n >= 3), "{c:?}");
    assert!(c.threads.is_some_and(|n| n >= 1), "{c:?}");
    assert!(c.maps.is_some_and(|n| n >= 5), "{c:?}");
    let s = Snapshot::take();
    assert!(s.harness_maps.is_some());
}

// The cases below that do not depend on the harness-wide counts run here (in the test
// process, other tests running beside them); the ones that do run in a fresh process.

#[test]
fn a_live_child_then_a_zombie_then_a_reaped_one() {
    let before = Snapshot::take();
    let mut child = Command::new("sleep")
        .arg("30")
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn sleep");
    let pid = child.id();
    let plan = CleanupPlan {
        vmm_pid: Some(pid),
        ..Default::default()
    };
    let vmm = |o: &CleanupOutcome| {
        o.failures.iter().find_map(|f| match f {
            CleanupFailure::VmmNotReaped { pid: p, state } if *p == pid => Some(*state),
            _ => None,
        })
    };
    let o = verify_cleanup(&plan, &before);
    assert!(!o.ok);
    assert!(matches!(vmm(&o), Some('S' | 'R' | 'D')), "{o:?}");
    // Killed but not waited for: a zombie, still not reaped.
    // SAFETY: kill(2) on our own child's pid, which is not reaped yet (so not reused).
    let rc = unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    assert_eq!(rc, 0);
    let mut state = None;
    for _ in 0..500 {
        state = vmm(&verify_cleanup(&plan, &before));
        if state == Some('Z') {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    assert_eq!(state, Some('Z'));
    child.wait().expect("wait");
    let o = verify_cleanup(&plan, &before);
    assert_eq!(vmm(&o), None, "{o:?}");
    // A pid that is not our child (our parent, here) is not judged ours.
    let other = CleanupPlan {
        vmm_pid: Some(std::os::unix::process::parent_id()),
        ..Default::default()
    };
    assert!(!names(&verify_cleanup(&other, &before)).contains(&"vmm_not_reaped"));
}

#[test]
fn a_present_tap_and_a_bad_tap_name_fail() {
    let before = Snapshot::take();
    let tap = |t: &str| CleanupPlan {
        tap: Some(t.into()),
        ..Default::default()
    };
    // `lo` stands for a tap that is still there.
    let o = verify_cleanup(&tap("lo"), &before);
    assert!(
        o.failures
            .contains(&CleanupFailure::TapPresent { tap: "lo".into() }),
        "{o:?}"
    );
    let o = verify_cleanup(&tap("tcgone0"), &before);
    assert!(!names(&o).contains(&"tap_present"), "{o:?}");
    let o = verify_cleanup(&tap("../lo"), &before);
    assert!(names(&o).contains(&"bad_tap_name"), "{o:?}");
    assert!(!names(&o).contains(&"tap_present"), "{o:?}");
}

#[test]
fn leftover_files_sockets_and_dirs_fail_and_remove_run_dir_clears_them() {
    let before = Snapshot::take();
    let tmp = tempfile::tempdir().expect("tempdir");
    let run = tmp.path().join("run-0");
    std::fs::create_dir(&run).expect("mkdir");
    let sock = run.join("v.sock_1024");
    let listener = UnixListener::bind(&sock).expect("bind");
    drop(listener); // closed, but the socket file stays
    let image = tmp.path().join("0.img");
    std::fs::write(&image, b"img").expect("write");
    let plan = CleanupPlan {
        image: Some(image.clone()),
        run_dir: Some(run.clone()),
        sockets: vec![sock.clone()],
        ..Default::default()
    };
    let o = verify_cleanup(&plan, &before);
    let paths: Vec<_> = o
        .failures
        .iter()
        .filter(|f| {
            matches!(
                f,
                CleanupFailure::ImagePresent { .. }
                    | CleanupFailure::SocketPresent { .. }
                    | CleanupFailure::RunDirPresent { .. }
            )
        })
        .cloned()
        .collect();
    assert_eq!(
        paths,
        vec![
            CleanupFailure::ImagePresent {
                path: image.clone()
            },
            CleanupFailure::SocketPresent { path: sock.clone() },
            CleanupFailure::RunDirPresent { path: run.clone() },
        ]
    );
    // A stray file in the run directory keeps it from being removed.
    std::fs::write(run.join("stray"), b"x").expect("write");
    assert!(matches!(
        remove_run_dir(&run, std::slice::from_ref(&sock)),
        Err(RemoveError::Remove { .. })
    ));
    assert!(!sock.exists(), "the socket went first");
    std::fs::remove_file(run.join("stray")).expect("rm");
    remove_run_dir(&run, std::slice::from_ref(&sock)).expect("remove");
    super::super::workspace_clone::remove_image(&image).expect("rm image");
    let o = verify_cleanup(&plan, &before);
    assert!(
        !o.failures.iter().any(|f| matches!(
            f,
            CleanupFailure::ImagePresent { .. }
                | CleanupFailure::SocketPresent { .. }
                | CleanupFailure::RunDirPresent { .. }
                | CleanupFailure::Unreadable { .. }
        )),
        "{o:?}"
    );
}

/// Runs [`live_scenarios`] in a fresh process of this test binary, alone: the harness-wide
/// counts (descriptors, threads, mappings) are then the scenario's only.
#[test]
fn the_counts_catch_leaks_in_a_process_of_their_own() {
    let exe = std::env::current_exe().expect("current_exe");
    let out = Command::new(exe)
        .args([LIVE_TEST, "--exact", "--nocapture", "--test-threads=1"])
        .env(LIVE, "1")
        .stdin(Stdio::null())
        .output()
        .expect("run the live scenarios");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "live scenarios failed:\n{text}");
    assert!(
        text.contains("live scenarios: all passed"),
        "the scenarios did not run:\n{text}"
    );
}

/// Does nothing unless [`LIVE`] is set (then it is the only test of its process).
#[test]
fn live_scenarios() {
    if std::env::var_os(LIVE).is_none() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");

    // A whole launch's things made and cleaned: ok, nothing failed.
    let before = Snapshot::take();
    let run = tmp.path().join("run-0");
    std::fs::create_dir(&run).expect("mkdir");
    let sock = run.join("v.sock_1024");
    let listener = UnixListener::bind(&sock).expect("bind");
    let image = tmp.path().join("0.img");
    std::fs::write(&image, vec![7u8; 4096]).expect("image");
    let mut child = Command::new("true")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    child.wait().expect("wait");
    drop(listener);
    remove_run_dir(&run, std::slice::from_ref(&sock)).expect("rm run");
    super::super::workspace_clone::remove_image(&image).expect("rm image");
    let plan = CleanupPlan {
        vmm_pid: Some(pid),
        tap: Some("tcgone0".into()),
        image: Some(image.clone()),
        run_dir: Some(run.clone()),
        sockets: vec![sock.clone()],
    };
    let o = verify_cleanup(&plan, &before);
    assert!(o.ok, "a clean launch: {o:?}");
    assert!(o.failures.is_empty() && o.ns > 0);
    eprintln!("live scenarios: clean verify took {} µs", o.ns / 1000);

    // A leaked descriptor.
    let before = Snapshot::take();
    let leaked = std::fs::File::open("/proc/self/status").expect("open");
    let o = verify_cleanup(&CleanupPlan::default(), &before);
    assert_eq!(names(&o), vec!["fds_leaked"], "{o:?}");
    drop(leaked);
    assert!(verify_cleanup(&CleanupPlan::default(), &before).ok);

    // A leaked thread (still running after the 100 ms re-reads).
    let before = Snapshot::take();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        let _ = rx.recv();
    });
    let o = verify_cleanup(&CleanupPlan::default(), &before);
    assert!(names(&o).contains(&"threads_leaked"), "{o:?}");
    assert!(o.ns >= 100_000_000, "the re-reads waited: {o:?}");
    drop(tx);
    t.join().expect("join");
    // The joined thread's stack may stay mapped (glibc's stack cache): only threads and
    // descriptors are judged back to normal here.
    let o = verify_cleanup(&CleanupPlan::default(), &before);
    assert!(
        !names(&o).contains(&"threads_leaked") && !names(&o).contains(&"fds_leaked"),
        "{o:?}"
    );

    // A leaked mapping.
    let before = Snapshot::take();
    // SAFETY: a fresh anonymous private mapping of one page; no existing memory is touched.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    let o = verify_cleanup(&CleanupPlan::default(), &before);
    assert_eq!(names(&o), vec!["maps_leaked"], "{o:?}");
    // SAFETY: `p` is the one-page mapping made above, used by nothing.
    assert_eq!(unsafe { libc::munmap(p, 4096) }, 0);
    assert!(verify_cleanup(&CleanupPlan::default(), &before).ok);

    // Everything at once: each failure named.
    let before = Snapshot::take();
    std::fs::create_dir(&run).expect("mkdir");
    std::fs::write(&image, b"x").expect("image");
    let mut child = Command::new("sleep")
        .arg("30")
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn");
    let plan = CleanupPlan {
        vmm_pid: Some(child.id()),
        tap: Some("lo".into()),
        image: Some(image.clone()),
        run_dir: Some(run.clone()),
        sockets: vec![],
    };
    let o = verify_cleanup(&plan, &before);
    assert_eq!(
        names(&o),
        vec![
            "vmm_not_reaped",
            "tap_present",
            "image_present",
            "run_dir_present"
        ],
        "{o:?}"
    );
    child.kill().expect("kill");
    child.wait().expect("wait");
    drop(child);
    eprintln!("live scenarios: all passed");
}
