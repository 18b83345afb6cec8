//! The debug source on a real DRM driver: the kernel's DRM debug
//! messages and a dynamic-debug callsite diverted into the recorder
//! instead of printk, recorded unformatted, formatted when read.
//!
//! QEMU's standard VGA gives the guest bochs-drm. crashring.ko loads
//! first, selecting DRM's KMS, ATOMIC and STATE categories and the test
//! module's pr_debug() and ibdev_dbg() (about an RDMA device whose parent
//! is the VGA) by file:line (with every part of dynamic debug's prefix
//! switched on for them), so bochs's probe and a program's
//! modesets (raw KMS ioctls) send their messages to the recorder, never to
//! printk (drm.debug stays 0). While modesets flood in, the module is
//! unloaded and loaded again three times (the guest runs panic_on_warn).
//! Then a compositor-like program records its own stream, its "input"
//! category off until `crashring debug select` adds
//! user=compositor:render,input to the kernel's selection, and off again
//! when a selection without it replaces that one, the program running
//! throughout. At the end the selection adds "printk": each selected
//! message is then recorded and printed by the kernel itself, with
//! no_hash_pointers on the command line so that the kernel prints
//! addresses as they are. sysrq panic.
//!
//! The next boot's region must show: the DRM messages with their
//! category, device and level, and the test module's, every one formatted;
//! no category but the three, no callsite but the one; none of them among
//! the printk lines before "printk" was selected; after it, every message
//! exactly the line the kernel printed for the same call; the
//! compositor's frames on the same timeline; and its input lines only
//! while its "input" category was selected.
//!
//! The next boot is also the control: once the region is saved it unloads
//! crashring.ko, sets drm.debug to the three categories, binds bochs-drm
//! again, runs the modesets and saves dmesg. Every DRM message recovered
//! before the crash must be one of the lines printk printed there,
//! hexadecimal words and numbers aside (addresses and object ids differ
//! between boots): the module changes nothing about a message but where
//! it goes. The test module's messages are held to the kernel's own
//! printk in the crashed boot only: it cannot load without crashring.ko,
//! whose crashring_log() it calls.
//!
//! On 6.1 the module is loaded without a callsite area
//! (`callsite_pages=0`), so that every message takes the writer's
//! fallback, formatted in the kernel: DRM's with its `[drm:FUNCTION]`,
//! the test module's with dynamic debug's prefix and the device inside
//! it. The same checks hold of that text, the comparison with the
//! kernel's own printk lines among them; 6.12 and the newest kernel
//! record the messages unformatted.

use super::{parse_saved, warm_reboot_run, Artifacts, WarmReboot, CONTROL_MIB};
use crate::env::guest::{self, Kernel};
use anyhow::{ensure, Context, Result};
use pstore_ring::kprintf::Pointers;
use pstore_ring::layout::{CALLSITE_DRM, CALLSITE_DYNDBG, STREAM_USER};
use pstore_ring::merge::{merge, Item};
use pstore_ring::read::{drm_category_name, DebugEvent, Region};
use pstore_ring::schema::{
    Value, DEBUG_FORMATTED, EVENT_DEBUG, EVENT_LOG, EVENT_MARKER, EVENT_PRINTK,
};
use std::collections::{BTreeMap, BTreeSet};
use xshell::Shell;

/// The compositor's user and the crashring group (as in compositor-crash).
const MEMBER: u32 = 1000;
const GROUP: u32 = 990;

/// The DRM categories selected; every other one must stay out.
const CATEGORIES: &[&str] = &["KMS", "ATOMIC", "STATE"];

/// The test module's pr_debug() and ibdev_dbg() the selection names by
/// file:line.
const TEST_SOURCE: &str = "kernel/test/crashring_test.c";
const TEST_CALL: &str = "pr_debug(\"[drm:drm_atomic_commit] crtc-41 flip seq=%u\\n\"";
const TEST_IB_CALL: &str = "ibdev_dbg(&drm_ibdev, \"qp-7 flush seq=%u\\n\"";

/// The test module's RDMA device as __dynamic_ibdev_dbg() names it: its
/// parent's driver and name (the standard VGA's), then its own.
const IB_DEVICE: &str = "bochs-drm 0000:00:02.0 crashring_ib0";

/// The markers before "printk" is added to the selection, after it (the
/// write returns once every message after it is printed too), and before
/// the crash, which may come between a message's record and its printk.
const SWITCH: &str = "crashring-test: printk next";
const BOTH: &str = "crashring-test: printk too";
const END: &str = "crashring-test: compared up to here";

/// The markers before the compositor's "input" category is selected and
/// a second after. SWITCH comes before the selection without it, BOTH a
/// second after that.
const INPUT_NEXT: &str = "crashring-test: input next";
const INPUT_ON: &str = "crashring-test: input on";

/// The compositor's categories as `crashring debug show` says them, with
/// "input" selected and after.
const INPUT_SELECTED: &str = "crashring-test: user compositor: render+ input+";
const INPUT_DROPPED: &str = "crashring-test: user compositor: render+ input-";

/// bochs-drm's device, as dev_printk() names it.
const DEVICE: &str = "bochs-drm 0000:00:02.0";
/// The standard VGA's PCI address.
const VGA: &str = "0000:00:02.0";
/// The control's first line in dmesg.
const CONTROL_BEGINS: &str = "crashring-test: the control begins";

pub fn drm_flight_recorder(sh: &Shell, k: &Kernel, art: &Artifacts) -> Result<String> {
    let source = std::fs::read_to_string(sh.current_dir().join(TEST_SOURCE))?;
    let line_of = |call: &str| {
        source
            .lines()
            .position(|l| l.contains(call))
            .map(|n| n as u32 + 1)
            .with_context(|| format!("the test module's {call} is gone"))
    };
    let (line, ib_line) = (line_of(TEST_CALL)?, line_of(TEST_IB_CALL)?);
    let select = format!(
        "drm={};file=crashring_test.c:{line};file=crashring_test.c:{ib_line}",
        CATEGORIES.join(",")
    );
    // Every part of dynamic debug's prefix the kernel has (+s, the file,
    // came in 6.3): the "printk" comparison checks the reader's prefix
    // against the kernel's own.
    let dyndbg = if k.series == "6.1" {
        "+pmflt"
    } else {
        "+pmfslt"
    };
    let words = select.replace(';', " ");
    // The compositor's stream (its pool's only one) holds its events
    // since before its input category went on: 5 s at some 2,500 a second.
    let formatted = k.series == "6.1";
    let module_args = format!(
        "region=16M@0x40000000 user_streams=1 user_stream_pages=256 'debug={select}'{}",
        if formatted { " callsite_pages=0" } else { "" }
    );
    let compositor = guest::build_compositor(sh)?;
    let modeset = guest::build_modeset(sh)?;
    let (comp, mode) = (
        compositor.to_str().context("a path that is not UTF-8")?,
        modeset.to_str().context("a path that is not UTF-8")?,
    );
    let record = format!(
        "echo \"crashring-test: selected $(head -n 2 /sys/kernel/crashring/debug)\"\n\
         load_later\n\
         {mode} /dev/dri/card0 300 &\n\
         for i in 1 2 3; do\n\
         \x20 rmmod crashring && insmod /lib/crashring.ko {module_args} || echo \"crashring-test: reload $i failed\"\n\
         \x20 echo 1 > /sys/kernel/crashring/previous_ack\n\
         done\n\
         wait\n\
         echo \"crashring-test: reloaded $(cat /sys/kernel/crashring/status)\"\n\
         chgrp {GROUP} /dev/crashring\n\
         insmod /lib/crashring_test.ko action=drm ibdev=1 dyndbg={dyndbg}\n\
         {comp} run {MEMBER} {GROUP} &\n\
         {mode} /dev/dri/card0 6\n\
         echo '{INPUT_NEXT}' > /dev/crashring\n\
         crashring debug select {words} user=compositor:render,input\n\
         crashring debug show | sed -n 's/^user /crashring-test: user /p'\n\
         sleep 1\n\
         echo '{INPUT_ON}' > /dev/crashring\n\
         sleep 1\n\
         echo '{SWITCH}' > /dev/crashring\n\
         echo '{select};printk' > /sys/kernel/crashring/debug\n\
         crashring debug show | sed -n 's/^user /crashring-test: user /p'\n\
         sleep 1\n\
         echo '{BOTH}' > /dev/crashring\n\
         {mode} /dev/dri/card0 2\n\
         echo '{END}' > /dev/crashring\n\
         sleep 1\n\
         echo c > /proc/sysrq-trigger\n\
         sleep 30\n"
    );
    let drm_debug = (0..16)
        .filter(|&bit| drm_category_name(bit).is_some_and(|c| CATEGORIES.contains(&c)))
        .fold(0u32, |mask, bit| mask | 1 << bit);
    // The control tests printk, not crashring: a WARN in bochs-drm's
    // unbind is not this scenario's to panic on. The boot log is cleared
    // first and printk's ring is 4 MiB (log_buf_len), so that it holds all
    // of the control, from its first line; the modeset program's lines
    // are told from the record phase's.
    let control = format!(
        "  rmmod crashring || echo 'crashring-test: control: crashring.ko stayed'\n\
         \x20 echo 0 > /proc/sys/kernel/panic_on_warn\n\
         \x20 load_later\n\
         \x20 dmesg -c > /dev/null\n\
         \x20 echo '{CONTROL_BEGINS}' > /dev/kmsg\n\
         \x20 echo {drm_debug:#x} > /sys/module/drm/parameters/debug\n\
         \x20 echo {VGA} > /sys/bus/pci/drivers/bochs-drm/unbind\n\
         \x20 echo {VGA} > /sys/bus/pci/drivers/bochs-drm/bind\n\
         \x20 {mode} /dev/dri/card0 6 | sed 's/^crashring-test: /crashring-test: control: /'\n\
         \x20 echo 0 > /sys/module/drm/parameters/debug\n\
         \x20 dmesg | dd of=/dev/vda bs=1M seek={CONTROL_MIB} conv=fsync 2>/dev/null\n"
    );
    let plan = WarmReboot {
        name: "drm-flight-recorder",
        module_args: &module_args,
        extra_append: "no_hash_pointers log_buf_len=4M",
        test_module: true,
        programs: &[comp, mode],
        qemu_args: &["-vga", "std"],
        later_modules: &["bochs"],
        after_saving: &control,
        ..WarmReboot::memmap(record)
    };
    let saved = warm_reboot_run(sh, k, art, &plan)?;
    ensure!(
        !saved.said("control: crashring.ko stayed"),
        "the control could not unload crashring.ko"
    );
    ensure!(
        saved.said("crashring-test: control: modeset 6 done"),
        "the control's modeset program did not finish"
    );
    ensure!(
        saved.said("crashring-test: reloaded") && !saved.said("failed"),
        "the module's unloads and loads under the modeset flood did not all succeed"
    );
    ensure!(
        saved.said("crashring-test: modeset 2 done"),
        "the modeset program did not finish"
    );
    ensure!(
        saved.said(INPUT_SELECTED) && saved.said(INPUT_DROPPED),
        "`crashring debug show` did not say the compositor's input category went on, then off"
    );
    let sites = Selected {
        line,
        ib_line,
        formatted,
    };
    saved.check(|bytes| check(&parse_saved(bytes)?, &sites, &control_shapes(bytes)?))
}

/// The shapes of the lines the control printed (see the module's doc),
/// from dmesg's output at [`CONTROL_MIB`] of the saved disk.
fn control_shapes(image: &[u8]) -> Result<BTreeSet<Vec<u8>>> {
    let tail = image
        .get((CONTROL_MIB << 20) as usize..)
        .context("the saved disk ends before the control's dmesg")?;
    let end = tail.iter().position(|&b| b == 0).unwrap_or(tail.len());
    let text = &tail[..end];
    ensure!(
        text.windows(CONTROL_BEGINS.len())
            .any(|w| w == CONTROL_BEGINS.as_bytes()),
        "the control's dmesg does not begin where it did: printk's ring lost its first lines, or the control did not run"
    );
    let shapes: BTreeSet<_> = text
        .split(|&b| b == b'\n')
        // "[    12.345678] " before each line.
        .filter_map(|l| l.iter().position(|&b| b == b']').map(|at| &l[at + 1..]))
        .map(|l| shape(l.strip_prefix(b" ").unwrap_or(l)))
        .collect();
    Ok(shapes)
}

/// A line with what differs between boots left out: each word of eight
/// or more hexadecimal digits (an address) and each run of decimal digits
/// within a word (an object id, a size) becomes "#".
fn shape(line: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(line.len());
    for word in line.split_inclusive(|b| !b.is_ascii_alphanumeric()) {
        let (word, end) = match word.split_last() {
            Some((&last, rest)) if !last.is_ascii_alphanumeric() => (rest, Some(last)),
            _ => (word, None),
        };
        if word.len() >= 8 && word.iter().all(u8::is_ascii_hexdigit) {
            out.push(b'#');
        } else {
            for run in word.chunk_by(|a, b| a.is_ascii_digit() == b.is_ascii_digit()) {
                match run.first().is_some_and(u8::is_ascii_digit) {
                    true => out.push(b'#'),
                    false => out.extend_from_slice(run),
                }
            }
        }
        out.extend(end);
    }
    out
}

fn text<'a>(values: &'a [Value<'a>], i: usize) -> &'a [u8] {
    match values.get(i) {
        Some(Value::Str(s) | Value::Chars(s)) => s,
        _ => b"",
    }
}

/// The test module's two selected lines, and whether the module kept no
/// callsite area, so that every message came formatted.
struct Selected {
    line: u32,
    ib_line: u32,
    formatted: bool,
}

/// Where a debug message came from: DRM, or the test module's callsite at
/// a line. Unformatted, its callsite says; formatted, which keeps no
/// callsite, its category and dynamic debug's prefix in its text say.
fn origin(
    region: &Region<'_>,
    d: &DebugEvent<'_>,
    text: &[u8],
    sites: &Selected,
) -> Result<Option<u32>> {
    let formatted = d.flags & DEBUG_FORMATTED != 0;
    ensure!(
        formatted == sites.formatted,
        "a message {} its callsite: {}",
        if formatted {
            "formatted without"
        } else {
            "recorded with"
        },
        String::from_utf8_lossy(text)
    );
    if formatted {
        if drm_category_name(d.category).is_some() {
            return Ok(None);
        }
        let has = |part: &str| text.windows(part.len()).any(|w| w == part.as_bytes());
        return [sites.line, sites.ib_line]
            .into_iter()
            .find(|l| has(&format!(":{l}: ")))
            .map(Some)
            .with_context(|| {
                format!(
                    "a formatted message of no DRM category and neither selected line: {}",
                    String::from_utf8_lossy(text)
                )
            });
    }
    let c = region
        .debug_message(d, &Pointers::Raw)
        .callsite
        .context("a debug event without its callsite")?;
    if c.source == CALLSITE_DRM {
        return Ok(None);
    }
    ensure!(
        c.source == CALLSITE_DYNDBG
            && (c.line == sites.line || c.line == sites.ib_line)
            // 7.3 builds an external module with paths relative to it.
            && (c.file == b"crashring_test.c" || c.file.ends_with(b"/crashring_test.c")),
        "a dynamic-debug callsite that was not selected: {}:{}",
        String::from_utf8_lossy(c.file),
        c.line
    );
    Ok(Some(c.line))
}

/// What came back, as the module says; `control`, the shapes of what
/// printk printed for the same calls without the module.
fn check(region: &Region<'_>, sites: &Selected, control: &BTreeSet<Vec<u8>>) -> Result<String> {
    let (line, ib_line) = (sites.line, sites.ib_line);
    let trace = region.decode();
    let e = region.header.endian;
    let debug = region.schema.get(EVENT_DEBUG).context("no debug type")?;
    let printk = region.schema.get(EVENT_PRINTK).context("no printk type")?;
    let marker = region.schema.get(EVENT_MARKER).context("no marker type")?;
    let log = region.schema.get(EVENT_LOG).context("no log type")?;
    let comp = trace
        .streams
        .iter()
        .find(|s| s.info.kind == STREAM_USER && s.info.name == "compositor")
        .context("no user stream named compositor")?;
    // Per category (or the test module's callsite), how many messages.
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut diverted = Vec::new();
    let mut printed_before = Vec::new();
    // The DRM messages before END (what comes after may be the panic's
    // own), by shape.
    let mut drm_shapes = BTreeSet::new();
    let (mut both_diverted, mut both_printed) = (Vec::new(), BTreeMap::<Vec<u8>, usize>::new());
    let (mut switching, mut after_both, mut after_end) = (false, false, false);
    let (mut frames, mut debug_amid_frames) = (0usize, 0usize);
    // The compositor's input lines before INPUT_NEXT, after INPUT_ON and
    // before SWITCH, and after BOTH.
    let (mut input_next, mut input_on) = (false, false);
    let (mut input_before, mut input_while, mut input_after) = (0usize, 0usize, 0usize);
    for item in merge(&trace.streams) {
        let Item::Event(ev) = item else { continue };
        match ev.type_id {
            EVENT_DEBUG => {
                let d = DebugEvent::parse(debug, ev.payload, e)
                    .context("a debug event that does not decode")?;
                let text = region
                    .debug_message(&d, &Pointers::Raw)
                    .text
                    .with_context(|| {
                        format!("a message of callsite {} does not format", d.callsite)
                    })?;
                ensure!(d.level == 7, "a debug message at level {}", d.level);
                let at = origin(region, &d, &text, sites)?;
                let key = if at.is_none() {
                    let name = drm_category_name(d.category).unwrap_or("?");
                    ensure!(
                        CATEGORIES.contains(&name),
                        "category {name} was not selected: {}",
                        String::from_utf8_lossy(&text)
                    );
                    ensure!(
                        d.device == DEVICE.as_bytes() || d.device.is_empty(),
                        "a DRM message about {:?}",
                        String::from_utf8_lossy(d.device)
                    );
                    format!("drm.{name}")
                } else {
                    // Its prefix: the thread id, module, function, (file,)
                    // line, as the module was loaded with; then the RDMA
                    // device as ibdev_dbg() names it, which a formatted
                    // message holds in its text.
                    let has = |part: &[u8]| text.windows(part.len()).any(|w| w == part);
                    let (after, key) = if at == Some(ib_line) {
                        ensure!(
                            d.device == IB_DEVICE.as_bytes()
                                || (sites.formatted && d.device.is_empty()),
                            "an ibdev_dbg() message about {:?}",
                            String::from_utf8_lossy(d.device)
                        );
                        (format!(":{ib_line}: {IB_DEVICE}: qp-7"), "ibdev_dbg")
                    } else {
                        (
                            format!(":{line}: [drm:drm_atomic_commit]"),
                            "crashring_test.c",
                        )
                    };
                    ensure!(
                        text.starts_with(b"[")
                            && has(b"] crashring_test:drm_fn:")
                            && has(after.as_bytes()),
                        "the test module's message without dynamic debug's prefix: {}",
                        String::from_utf8_lossy(&text)
                    );
                    key.into()
                };
                *counts.entry(key).or_default() += 1;
                if frames > 0 {
                    debug_amid_frames += 1;
                }
                let text = text.strip_suffix(b"\n").unwrap_or(&text).to_vec();
                if at.is_none() && !after_end {
                    drm_shapes.insert(shape(&text));
                }
                match (switching, after_both, after_end) {
                    (false, ..) => diverted.push(text),
                    (true, true, false) => both_diverted.push(text),
                    // While "printk" is being selected, either; after the
                    // last marker, its printk may not have come before
                    // the crash.
                    _ => {}
                }
            }
            EVENT_PRINTK => {
                let v = printk
                    .decode(ev.payload, e)
                    .ok()
                    .context("a printk event")?;
                let t = text(&v, 4).to_vec();
                if after_both {
                    *both_printed.entry(t).or_default() += 1;
                } else if !switching {
                    printed_before.push(t);
                }
            }
            EVENT_MARKER => {
                let v = marker.decode(ev.payload, e).ok().context("a marker")?;
                switching |= text(&v, 2) == SWITCH.as_bytes();
                after_both |= text(&v, 2) == BOTH.as_bytes();
                after_end |= text(&v, 2) == END.as_bytes();
                input_next |= text(&v, 2) == INPUT_NEXT.as_bytes();
                input_on |= text(&v, 2) == INPUT_ON.as_bytes();
            }
            EVENT_LOG if ev.stream == comp.info.index => {
                let v = log.decode(ev.payload, e).ok().context("a log event")?;
                frames += usize::from(text(&v, 2).starts_with(b"frame "));
                if text(&v, 2).starts_with(b"pointer at frame ") {
                    match (input_next, input_on && !switching, after_both) {
                        (false, ..) => input_before += 1,
                        (_, true, _) => input_while += 1,
                        (.., true) => input_after += 1,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    for want in ["drm.KMS", "drm.ATOMIC", "crashring_test.c", "ibdev_dbg"] {
        ensure!(
            counts.get(want).is_some_and(|&n| n > 0),
            "no {want} message came back: {counts:?}"
        );
    }
    ensure!(
        switching && after_both && after_end,
        "the markers around the \"printk\" selection are missing"
    );
    // Diverted, so never printed.
    let leaked: Vec<_> = diverted
        .iter()
        .filter(|m| printed_before.contains(m))
        .take(3)
        .map(|m| String::from_utf8_lossy(m).into_owned())
        .collect();
    ensure!(
        leaked.is_empty(),
        "diverted messages reached printk: {leaked:?}"
    );
    // With "printk", the kernel printed each message the reader formats.
    ensure!(
        !both_diverted.is_empty(),
        "no message was recorded after \"printk\" was selected"
    );
    for m in &both_diverted {
        let left = both_printed
            .get_mut(m)
            .filter(|n| **n > 0)
            .with_context(|| {
                format!(
                    "the reader formats {:?}, which the kernel did not print",
                    String::from_utf8_lossy(m)
                )
            })?;
        *left -= 1;
    }
    // Without the module, printk printed each of them.
    let unprinted: Vec<_> = drm_shapes
        .difference(control)
        .take(3)
        .map(|m| String::from_utf8_lossy(m).into_owned())
        .collect();
    ensure!(
        unprinted.is_empty(),
        "DRM messages recovered that printk never printed without the module (shapes): {unprinted:?}"
    );
    ensure!(frames > 0, "no compositor frames came back");
    ensure!(
        input_next && input_on && input_while > 0 && input_before == 0 && input_after == 0,
        "the compositor's input lines: {input_before} before its category was selected, {input_while} while it was, {input_after} after (markers seen: {input_next} {input_on})"
    );
    ensure!(
        debug_amid_frames > 0,
        "no debug message merged among the compositor's frames"
    );
    Ok(format!(
        "{counts:?} recovered and formatted, none printed; {} messages after \"printk\" each the kernel's own line; their {} DRM shapes among the {} lines printk printed without the module; {frames} compositor frames with {debug_amid_frames} messages among them; {input_while} input lines while its category was selected, none outside",
        both_diverted.len(),
        drm_shapes.len(),
        control.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::shape;

    #[test]
    fn a_shape_leaves_out_addresses_and_numbers_but_not_words() {
        assert_eq!(
            shape(b"bochs-drm 0000:00:02.0: [drm:drm_atomic_state_init] Allocated atomic state ffff888003abc000"),
            b"bochs-drm #:#:#.#: [drm:drm_atomic_state_init] Allocated atomic state #"
        );
        assert_eq!(
            shape(b"[CRTC:34:crtc-0] mode 1024x768, fb 38"),
            b"[CRTC:#:crtc-#] mode #x#, fb #"
        );
        // Words of hexadecimal letters under eight long are words.
        assert_eq!(shape(b"added face to bad cafe"), b"added face to bad cafe");
        assert_ne!(shape(b"crtc-0 on"), shape(b"crtc-0 off"));
    }
}
