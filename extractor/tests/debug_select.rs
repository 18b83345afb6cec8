//! `crashring debug` through the real binary, on a copy of a machine: the
//! module's sysfs `debug`, dynamic debug's control file with a loadable
//! module's callsite and a built-in one, and /sys/module.

mod common;

use common::crashring;
use kexec_hooks::debug::DEBUG_MODPROBE;
use kexec_hooks::system::System;

const CONTROL: &str = "# filename:lineno [module]function flags format\n\
drivers/net/ethernet/intel/e1000/e1000_main.c:2431 [e1000]e1000_watchdog =_ \"link up %s\\n\"\n\
init/main.c:1424 [main]run_init_process =_ \"  with arguments:\\n\"\n\
drivers/hid/hid-input.c:700 [hid]hidinput_configure_usage =_ \"key %d\\n\"\n";

fn machine() -> (tempfile::TempDir, System, String) {
    let dir = tempfile::tempdir().unwrap();
    let sys = System::new(dir.path());
    sys.write("/sys/kernel/crashring/debug", "\ndiverting:\n")
        .unwrap();
    sys.write("/proc/dynamic_debug/control", CONTROL).unwrap();
    sys.write("/sys/module/e1000/initstate", "live\n").unwrap();
    let root = dir.path().to_str().unwrap().to_string();
    (dir, sys, root)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn select_tells_dynamic_debug_and_the_module_and_keeps_it() {
    let (_dir, sys, root) = machine();
    let out = crashring(&[
        "debug",
        "select",
        "drm=KMS,ATOMIC",
        "file=e1000_main.c:2431",
        "func=run_init_process",
        "--printk",
        "--persist",
        "--root",
        &root,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        sys.read("/sys/kernel/crashring/debug").unwrap().unwrap(),
        "drm=KMS,ATOMIC file=e1000_main.c:2431 func=run_init_process printk"
    );
    // The last query written (a real control file keeps its listing).
    assert_eq!(
        sys.read("/proc/dynamic_debug/control").unwrap().unwrap(),
        "func run_init_process +p"
    );
    let kept = sys.read(DEBUG_MODPROBE).unwrap().unwrap();
    assert!(
        kept.ends_with(
            "options crashring debug=drm=KMS,ATOMIC;file=e1000_main.c:2431;func=run_init_process;printk\n\
             options e1000 dyndbg=\"file e1000_main.c line 2431 +p\"\n"
        ),
        "{kept}"
    );
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("main is built into the kernel: add dyndbg=\"func run_init_process +p\""),
        "{stderr}"
    );

    let cleared = crashring(&["debug", "clear", "--persist", "--root", &root]);
    assert!(cleared.status.success(), "{}", text(&cleared.stderr));
    assert_eq!(
        sys.read("/sys/kernel/crashring/debug").unwrap().unwrap(),
        ""
    );
    assert_eq!(sys.read(DEBUG_MODPROBE).unwrap(), None);
}

#[test]
fn input_layer_callsites_need_input_and_bad_words_are_named() {
    let (_dir, sys, root) = machine();
    let out = crashring(&[
        "debug",
        "select",
        "file=drivers/hid/hid-input.c:700",
        "--root",
        &root,
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("give --input"),
        "{}",
        text(&out.stderr)
    );
    let bad = crashring(&["debug", "select", "drm=KMS,PIXELS", "--root", &root]);
    assert!(text(&bad.stderr).contains("`PIXELS` is not a DRM category"));
    // Neither touched the module.
    assert_eq!(
        sys.read("/sys/kernel/crashring/debug").unwrap().unwrap(),
        "\ndiverting:\n"
    );
    let ok = crashring(&[
        "debug",
        "select",
        "file=drivers/hid/hid-input.c:700",
        "--input",
        "--root",
        &root,
    ]);
    assert!(ok.status.success(), "{}", text(&ok.stderr));
    assert_eq!(
        sys.read("/sys/kernel/crashring/debug").unwrap().unwrap(),
        "file=drivers/hid/hid-input.c:700 input"
    );
}

#[test]
fn list_names_categories_and_callsites_and_marks_the_input_layer() {
    let (_dir, _sys, root) = machine();
    let out = crashring(&["debug", "list", "--root", &root]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let list = text(&out.stdout);
    assert!(
        list.contains("CORE DRIVER KMS PRIME ATOMIC VBL STATE LEASE DP DRMRES"),
        "{list}"
    );
    assert!(list.contains("[e1000]e1000_watchdog"), "{list}");
    assert!(
        list.contains("hidinput_configure_usage =_ \"key %d\\n\" (input)"),
        "{list}"
    );
    let filtered = text(&crashring(&["debug", "list", "e1000", "--root", &root]).stdout);
    assert!(!filtered.contains("run_init_process"), "{filtered}");
}

#[test]
fn programs_categories_are_selected_and_listed_beside_the_kernels() {
    let (_dir, sys, root) = machine();
    let out = crashring(&[
        "debug",
        "select",
        "drm=KMS",
        "user=weston:render,input",
        "--persist",
        "--root",
        &root,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        sys.read("/sys/kernel/crashring/debug").unwrap().unwrap(),
        "drm=KMS user=weston:render,input"
    );
    // Nothing for dynamic debug; kept for the next boot's module.
    assert_eq!(
        sys.read("/proc/dynamic_debug/control").unwrap().unwrap(),
        CONTROL
    );
    let kept = sys.read(DEBUG_MODPROBE).unwrap().unwrap();
    assert!(
        kept.ends_with("options crashring debug=drm=KMS;user=weston:render,input\n"),
        "{kept}"
    );
    // What the module says of the programs holding streams.
    sys.write(
        "/sys/kernel/crashring/debug",
        "drm=KMS user=weston:render,input\ndiverting: __drm_dev_dbg\nuser weston: render+ input+ frame-\n",
    )
    .unwrap();
    let list = text(&crashring(&["debug", "list", "--root", &root]).stdout);
    assert!(
        list.contains("programs' categories (user=NAME:CATEGORY,...; + recorded now):\n  weston: render+ input+ frame-\n"),
        "{list}"
    );
    for bad in ["user=weston", "user=:render", "user=weston:a,,b"] {
        let out = crashring(&["debug", "select", bad, "--root", &root]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(text(&out.stderr).contains(bad), "{}", text(&out.stderr));
    }
}
