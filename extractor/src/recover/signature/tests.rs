//! The signature against real kernel reports: one cause on different
//! boots, different causes, other CPUs' lines, a reasoned shutdown, and
//! any text a damaged region could hold.

use super::*;
use pstore_ring::endian::Endian;
use pstore_ring::layout::{REASON_OOPS, REASON_PANIC, REASON_SHUTDOWN, STATE_CLEAN, STATE_CRASHED};
use pstore_ring::read::HeaderTrust;
use pstore_ring::schema::builtin;
use pstore_ring::write::{self, RegionConfig, StreamSpec};

/// A region whose CPU `cpu` printed `lines` (one a microsecond, from
/// 1 s) and then crashed with `reason` and `message`; CPU 0 printed
/// `elsewhere` meanwhile.
fn crashed(cpu: u16, lines: &[&str], elsewhere: &[&str], reason: u32, message: &str) -> Vec<u8> {
    let specs = [StreamSpec::cpu(0), StreamSpec::cpu(1)];
    let cfg = RegionConfig {
        page_size: 4096,
        streams: &specs,
        endian: Endian::Little,
        ..Default::default()
    };
    let mut mem = vec![0u8; 256 * 1024];
    let mut region = write::format(&mut mem, &cfg).unwrap();
    let mut ws: Vec<_> = region.streams.by_ref().collect();
    let printk = builtin(EVENT_PRINTK).unwrap();
    let line = |w: &mut write::StreamWriter, ts: u64, text: &str| {
        let values = [
            Value::Unsigned(4),
            Value::Unsigned(0),
            Value::Unsigned(0),
            Value::Unsigned(ts),
            Value::Str(text.as_bytes()),
        ];
        w.write_event(ts, printk, &values).unwrap();
    };
    let start = 1_000_000_000;
    for (i, text) in elsewhere.iter().enumerate() {
        line(&mut ws[0], start + i as u64 * 1000, text);
    }
    let mut ts = start;
    for text in lines {
        ts += 1000;
        line(&mut ws[usize::from(cpu)], ts, text);
    }
    ts += 1000;
    let crash = builtin(EVENT_CRASH).unwrap();
    let values = [
        Value::Unsigned(reason.into()),
        Value::Unsigned(cpu.into()),
        Value::Str(message.as_bytes()),
    ];
    ws[usize::from(cpu)]
        .write_event(ts, crash, &values)
        .unwrap();
    ws.iter_mut().for_each(|w| w.close());
    drop(ws);
    let state = if reason == REASON_SHUTDOWN {
        STATE_CLEAN
    } else {
        STATE_CRASHED
    };
    region
        .control
        .set_state(state, reason, ts, cpu.into(), message);
    mem
}

fn signature(mem: &[u8]) -> Signature {
    let region = Region::parse(mem, HeaderTrust::Checksummed).unwrap();
    let trace = region.decode_paged();
    of(&region, &trace).unwrap()
}

/// A NULL pointer dereference in a module's ioctl, as 6.12 reports it;
/// `boot` changes what differs between two boots: addresses (KASLR),
/// pids, CPU numbers, times, offsets of a rebuilt module.
fn null_deref(boot: u64) -> Vec<String> {
    let base = 0xffff_ffff_c040_0000 + boot * 0x1_0000;
    [
        format!("BUG: kernel NULL pointer dereference, address: 00000000000000{:02x}", 8 + boot),
        "#PF: supervisor read access in kernel mode".into(),
        "#PF: error_code(0x0000) - not-present page".into(),
        "Oops: Oops: 0000 [#1] PREEMPT SMP NOPTI".into(),
        format!("CPU: {} UID: 0 PID: {} Comm: player Not tainted 6.12.117+deb12-amd64 #1  Debian 6.12.117-1~deb12u1", boot % 4, 1200 + boot),
        format!("RIP: 0010:signage_fb_blit+0x{:x}/0x1c0 [signage_fb]", 0x2a + boot),
        format!("Code: 48 8b 47 08 ... RSP: 0018:ffffb1c2{:08x} EFLAGS: 00010246", boot * 0x100),
        format!("RAX: 0000000000000000 RBX: {base:016x} RCX: 0000000000000000"),
        "Call Trace:".into(),
        " <TASK>".into(),
        " ? __die+0x23/0x70".into(),
        " ? page_fault_oops+0x171/0x4e0".into(),
        " ? exc_page_fault+0x7f/0x180".into(),
        " ? asm_exc_page_fault+0x26/0x30".into(),
        format!(" signage_fb_ioctl+0x{:x}/0x300 [signage_fb]", 0x91 + boot),
        " drm_ioctl_kernel+0xb3/0x100 [drm]".into(),
        " drm_ioctl+0x27e/0x4e0 [drm]".into(),
        " __x64_sys_ioctl+0x94/0xd0".into(),
        " do_syscall_64+0x82/0x190".into(),
        " entry_SYSCALL_64_after_hwframe+0x76/0x7e".into(),
        format!("RIP: 0033:0x7f{:010x}", boot * 0x1234),
        " </TASK>".into(),
        "Modules linked in: signage_fb drm".into(),
        "CR2: 0000000000000008".into(),
        "---[ end trace 0000000000000000 ]---".into(),
    ]
    .into()
}

/// A WARN_ON() in a DRM helper (another cause).
fn warning() -> Vec<String> {
    [
        "------------[ cut here ]------------",
        "WARNING: CPU: 2 PID: 311 at drivers/gpu/drm/drm_atomic_helper.c:1681 drm_atomic_helper_wait_for_vblanks+0x20b/0x240 [drm_kms_helper]",
        "CPU: 2 UID: 0 PID: 311 Comm: weston Not tainted 6.12.117+deb12-amd64 #1",
        "RIP: 0010:drm_atomic_helper_wait_for_vblanks+0x20b/0x240 [drm_kms_helper]",
        "Call Trace:",
        " <TASK>",
        " ? __warn+0x84/0x130",
        " ? report_bug+0x1c3/0x1d0",
        " drm_atomic_helper_commit_tail+0x9e/0xb0 [drm_kms_helper]",
        " commit_tail+0xc6/0x1a0 [drm_kms_helper]",
        " drm_atomic_helper_commit+0x11a/0x140 [drm_kms_helper]",
        " drm_atomic_commit+0xa6/0xe0 [drm]",
        " </TASK>",
        "---[ end trace 0000000000000000 ]---",
        "Kernel panic - not syncing: kernel: panic_on_warn set ...",
    ]
    .map(String::from)
    .into()
}

/// sysrq's crash, under a writer that printed beside it.
fn sysrq(boot: u64) -> Vec<String> {
    let mut lines: Vec<String> = (0..20)
        .map(|i| format!("signage: boot {boot} cpu 1 printk {}", i + boot * 100))
        .collect();
    lines.extend(
        [
            "sysrq: Trigger a crash",
            "Kernel panic - not syncing: sysrq triggered crash",
        ]
        .map(String::from),
    );
    lines.push(format!(
        "CPU: 1 UID: 0 PID: {} Comm: sh Not tainted 6.12.117+deb12-amd64 #1",
        700 + boot
    ));
    lines.extend(
        [
            "Call Trace:",
            " <TASK>",
            " dump_stack_lvl+0x5d/0x80",
            " panic+0x118/0x2f0",
            " sysrq_handle_crash+0x16/0x20",
            " __handle_sysrq+0x9b/0x190",
            " write_sysrq_trigger+0x5f/0x80",
            " proc_reg_write+0x56/0xa0",
            " </TASK>",
        ]
        .map(String::from),
    );
    lines
}

fn refs(lines: &[String]) -> Vec<&str> {
    lines.iter().map(String::as_str).collect()
}

#[test]
fn one_cause_on_different_boots_shares_one_signature() {
    let a = signature(&crashed(
        1,
        &refs(&null_deref(0)),
        &[],
        REASON_OOPS,
        "Fatal exception",
    ));
    let b = signature(&crashed(
        0,
        &refs(&null_deref(3)),
        &[],
        REASON_OOPS,
        "Fatal exception",
    ));
    assert_eq!(a, b);
    assert_eq!(
        a.basis,
        [
            "reason: oops",
            "message: Fatal exception",
            "title: BUG: kernel NULL pointer dereference, address: ?",
            "at: signage_fb_blit [signage_fb]",
            "calls: signage_fb_ioctl [signage_fb] < drm_ioctl_kernel [drm] < drm_ioctl [drm]",
        ]
    );
    assert_eq!(a.id.len(), 16);
    let s1 = signature(&crashed(
        1,
        &refs(&sysrq(1)),
        &[],
        REASON_PANIC,
        "sysrq triggered crash",
    ));
    let s2 = signature(&crashed(
        1,
        &refs(&sysrq(2)),
        &[],
        REASON_PANIC,
        "sysrq triggered crash",
    ));
    assert_eq!(s1, s2);
    assert_eq!(
        s1.basis[2..],
        [
            "title: sysrq: Trigger a crash",
            "calls: sysrq_handle_crash < __handle_sysrq < write_sysrq_trigger",
        ]
    );
}

#[test]
fn different_causes_have_different_signatures() {
    let oops = signature(&crashed(
        1,
        &refs(&null_deref(0)),
        &[],
        REASON_OOPS,
        "Fatal exception",
    ));
    let warn = signature(&crashed(
        1,
        &refs(&warning()),
        &[],
        REASON_PANIC,
        "kernel: panic_on_warn set ...",
    ));
    let sysrq = signature(&crashed(
        1,
        &refs(&sysrq(0)),
        &[],
        REASON_PANIC,
        "sysrq triggered crash",
    ));
    // The same oops in another function of the same module.
    let other: Vec<String> = null_deref(0)
        .into_iter()
        .map(|l| l.replace("signage_fb_blit", "signage_fb_fill"))
        .collect();
    let elsewhere = signature(&crashed(
        1,
        &refs(&other),
        &[],
        REASON_OOPS,
        "Fatal exception",
    ));
    let ids = [&oops.id, &warn.id, &sysrq.id, &elsewhere.id];
    let unique: BTreeSet<_> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "{ids:?}");
    assert_eq!(
        warn.basis[2..],
        [
            "title: WARNING: CPU: # PID: # at drivers/gpu/drm/drm_atomic_helper.c:# drm_atomic_helper_wait_for_vblanks [drm_kms_helper]",
            "at: drm_atomic_helper_wait_for_vblanks [drm_kms_helper]",
            "calls: drm_atomic_helper_commit_tail [drm_kms_helper] < commit_tail [drm_kms_helper] < drm_atomic_helper_commit [drm_kms_helper]",
        ]
    );
}

#[test]
fn a_line_that_only_looks_like_a_report_is_no_title() {
    let mut lines = vec!["NMI watchdog: Perf NMI watchdog permanently disabled".to_string()];
    lines.extend(
        sysrq(0)
            .into_iter()
            .skip(20)
            .filter(|l| !l.starts_with("sysrq")),
    );
    let s = signature(&crashed(
        1,
        &refs(&lines),
        &[],
        REASON_PANIC,
        "sysrq triggered crash",
    ));
    assert!(
        !s.basis.iter().any(|b| b.starts_with("title:")),
        "{:?}",
        s.basis
    );
}

#[test]
fn what_other_cpus_printed_is_not_the_crash() {
    let alone = signature(&crashed(
        1,
        &refs(&sysrq(0)),
        &[],
        REASON_PANIC,
        "sysrq triggered crash",
    ));
    let noisy = signature(&crashed(
        1,
        &refs(&sysrq(0)),
        &refs(&warning()),
        REASON_PANIC,
        "sysrq triggered crash",
    ));
    assert_eq!(alone, noisy);
}

#[test]
fn a_reasoned_shutdown_has_one_and_a_running_region_none() {
    let a = signature(&crashed(
        0,
        &[],
        &[],
        REASON_SHUTDOWN,
        "player: watchdog timeout",
    ));
    assert_eq!(
        a.basis,
        ["reason: shutdown", "message: player: watchdog timeout"]
    );
    let specs = [StreamSpec::cpu(0)];
    let cfg = RegionConfig {
        page_size: 1024,
        streams: &specs,
        ..Default::default()
    };
    let mut mem = vec![0u8; 16 * 1024];
    write::format(&mut mem, &cfg).unwrap();
    let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
    assert_eq!(of(&region, &region.decode_paged()), None);
}

#[test]
fn normalizing_keeps_names_and_drops_what_differs() {
    assert_eq!(
        normalize("BUG: soft lockup - CPU#3 stuck for 22s! [kworker/3:1:117]"),
        "BUG: soft lockup - CPU## stuck for #s! [kworker/#:#:#]"
    );
    assert_eq!(
        normalize("general protection fault, probably for non-canonical address 0xdead000000000122:  0000 [#1]"),
        "general protection fault, probably for non-canonical address 0x?: # [##]"
    );
    assert_eq!(
        normalize("eth0 on x86_64 at ffffffffc0a01234+0x10/0x20"),
        "eth0 on x86_64 at ?"
    );
    assert_eq!(normalize("RAX: ffffffffffffffff"), "RAX: ?");
    assert_eq!(normalize("  a   b\t c "), "a b c");
    assert_eq!(
        frame("drm_ioctl+0x27e/0x4e0 [drm]").as_deref(),
        Some("drm_ioctl [drm]")
    );
    assert_eq!(
        frame("do_syscall_64+0x82/0x190").as_deref(),
        Some("do_syscall_64")
    );
    assert_eq!(
        frame("__handle_sysrq.cold+0x11/0x1c").as_deref(),
        Some("__handle_sysrq")
    );
    assert_eq!(frame("0x7f0012345678"), None);
    assert_eq!(frame("a + b"), None);
    assert_eq!(
        without_values("machine check, bank 4, addr 0x1234000, uncorrected (status 0xbe00000000000400: VAL; MCACOD 0x0400 internal timer error, MSCOD 0x0000)"),
        "machine check, bank 4, addr 0x?, uncorrected (status 0x?: VAL; MCACOD 0x? internal timer error, MSCOD 0x?)"
    );
}

#[test]
fn a_panic_without_a_report_is_known_by_its_own_call_trace() {
    let lines = [
        "Kernel panic - not syncing: crashring-test: panic in hard IRQ context",
        "CPU: 1 UID: 0 PID: 0 Comm: swapper/1 Tainted: G           O       6.12.117+deb12-amd64 #1",
        "Call Trace:",
        " <IRQ>",
        " dump_stack_lvl+0x5d/0x80",
        " panic+0x118/0x2f0",
        " crashring_test_timer+0x1d/0x20 [crashring_test]",
        " call_timer_fn+0x27/0x130",
        " __run_timers+0x223/0x2c0",
        " </IRQ>",
        " <TASK>",
        // The interrupted task's registers: not the crash's.
        "RIP: 0010:pv_native_safe_halt+0xb/0x10",
        " default_idle+0x9/0x20",
        " </TASK>",
    ];
    assert_eq!(
        timer_panic_basis(&lines),
        [
            "message: crashring-test: panic in hard IRQ context",
            "calls: crashring_test_timer [crashring_test] < call_timer_fn < __run_timers",
        ]
    );
}

/// The basis after its reason of a crash of CPU 1 that printed `lines`
/// and panicked from a timer.
fn timer_panic_basis(lines: &[&str]) -> Vec<String> {
    let s = signature(&crashed(
        1,
        lines,
        &[],
        REASON_PANIC,
        "crashring-test: panic in hard IRQ context",
    ));
    s.basis[1..].to_vec()
}

#[test]
fn arm64_reports_are_read_as_x86_ones_are() {
    // As Debian's arm64 6.12 printed them in QEMU: a panic in a timer
    // interrupt, and an oops in a module's init.
    let panic = [
        "Kernel panic - not syncing: crashring-test: panic in hard IRQ context",
        "CPU: 1 UID: 0 PID: 0 Comm: swapper/1 Tainted: G           OE      6.12.117+deb12-arm64 #1  Debian 6.12.117-1~deb12u1",
        "Hardware name: linux,dummy-virt (DT)",
        "Call trace:",
        " dump_backtrace+0xa0/0x128",
        " show_stack+0x20/0x38",
        " dump_stack_lvl+0x38/0x90",
        " dump_stack+0x18/0x28",
        " panic+0x398/0x400",
        " panic_timer_fn+0x34/0x40 [crashring_test]",
        " __hrtimer_run_queues+0x138/0x2d8",
        " hrtimer_interrupt+0x108/0x2c0",
        " arch_timer_handler_virt+0x34/0x58",
    ];
    assert_eq!(
        timer_panic_basis(&panic),
        [
            "message: crashring-test: panic in hard IRQ context",
            "calls: panic_timer_fn [crashring_test] < __hrtimer_run_queues < hrtimer_interrupt",
        ]
    );
    let oops = [
        "Unable to handle kernel NULL pointer dereference at virtual address 0000000000000000",
        "Mem abort info:",
        "  ESR = 0x0000000096000006",
        "  EC = 0x25: DABT (current EL), IL = 32 bits",
        "  SET = 0, FnV = 0",
        "  EA = 0, S1PTW = 0",
        "  FSC = 0x06: level 2 translation fault",
        "Data abort info:",
        "  ISV = 0, ISS = 0x00000006",
        "  CM = 0, WnR = 0",
        "user pgtable: 4k pages, 48-bit VAs, pgdp=0000000048ae4000",
        "[0000000000000000] pgd=0800000048b3d003, p4d=0800000048b3d003, pud=0800000048ad8003, pmd=0000000000000000",
        "Internal error: Oops: 0000000096000006 [#1] SMP",
        "Modules linked in: crashring(OE+)",
        "CPU: 1 PID: 93 Comm: insmod Tainted: G           OE      6.1.0-57-arm64 #1  Debian 6.1.192-3",
        "pc : __pi_strcmp+0x24/0x140",
        "lr : cr_add_cover+0x44/0x90 [crashring]",
        "sp : ffff8000087db990",
        "Call trace:",
        " __pi_strcmp+0x24/0x140",
        " walk_iomem_res_desc+0x7c/0xf0",
        " cr_range_in+0x60/0x9c [crashring]",
        " crashring_init+0x180/0x1000 [crashring]",
        " do_one_initcall+0x64/0x26c",
    ];
    let s = signature(&crashed(1, &oops, &[], REASON_OOPS, "Fatal exception"));
    assert_eq!(
        s.basis[1..],
        [
            "message: Fatal exception",
            "title: Unable to handle kernel NULL pointer dereference at virtual address ?",
            "at: __pi_strcmp",
            "calls: walk_iomem_res_desc < cr_range_in [crashring] < crashring_init [crashring]",
        ]
    );
    // 6.1 names the return address of sysrq_handle_crash()'s call to
    // panic(), its last instruction, after the function behind it.
    let sysrq = [
        "Kernel panic - not syncing: sysrq triggered crash",
        "CPU: 0 PID: 1 Comm: init Tainted: G           OE      6.1.0-57-arm64 #1  Debian 6.1.192-3",
        "Call trace:",
        " dump_backtrace+0xe4/0x140",
        " show_stack+0x20/0x30",
        " dump_stack_lvl+0x64/0x80",
        " dump_stack+0x18/0x34",
        " panic+0x184/0x36c",
        " sysrq_reset_seq_param_set+0x0/0xa0",
        " __handle_sysrq+0x90/0x19c",
        " write_sysrq_trigger+0x7c/0xc8",
        " proc_reg_write+0xa8/0x100",
    ];
    let s = signature(&crashed(
        0,
        &sysrq,
        &[],
        REASON_PANIC,
        "sysrq triggered crash",
    ));
    assert_eq!(
        s.basis[1..],
        [
            "message: sysrq triggered crash",
            "calls: __handle_sysrq < write_sysrq_trigger < proc_reg_write",
        ]
    );
}

proptest::proptest! {
    /// Any text, as a hostile or damaged region's printk lines could hold:
    /// read without panic, and addresses and offsets never reach the basis.
    #[test]
    fn any_report_text_is_read_without_panic(
        lines in proptest::collection::vec("(BUG: |RIP: 0010:|Call Trace:| ? |<TASK>|[a-z_]{1,8}\\+0x[0-9a-f]{1,4}/0x[0-9a-f]{1,4}|[ -~]{0,12}|\\PC{0,6})*", 0..40),
        address in proptest::num::u64::ANY,
    ) {
        let basis = report_lines(&lines);
        for line in &basis {
            proptest::prop_assert!(!line.contains("+0x"), "{line}");
        }
        let one = normalize(&format!("fault at {address:016x} in f+0x1/0x2"));
        proptest::prop_assert_eq!(one, normalize("fault at ffffffffc0a01234 in f+0x9/0x40"));
    }
}
