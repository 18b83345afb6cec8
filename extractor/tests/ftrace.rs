//! The kernel's persistent ftrace buffer read by the real binary
//! (`crashring ftrace`): found by a search in a vmcore, read at an
//! address in an image, named by formats; damage, a missing buffer and
//! bad formats said so by the exit status and stderr.

mod common;

use common::{crashring, ftrace_area, synth, write_tmp};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The seed of `word`'s layout at 1 MiB of an ELF vmcore.
fn vmcore(word: u32) -> Vec<u8> {
    let base = 0x10_0000usize;
    let mut mem = vec![0u8; base];
    mem.extend(ftrace_area::seed(word));
    synth::elf(&mem, &[synth::load(0, mem.len() as u64)], None, 1, false)
}

#[test]
fn a_vmcores_buffer_is_found_and_printed_in_time_order() {
    for (word, layout) in [
        (56, "Linux 6.12 layout"),
        (0x0018_0020, "Linux 6.15+ layout"),
    ] {
        let path = write_tmp(&format!("ftrace-{word:x}.elf"), &vmcore(word));
        let out = crashring(&["ftrace", path.to_str().unwrap()]);
        let (stdout, err) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(0), "{err}");
        assert!(
            err.starts_with(&format!(
                "crashring: {}: ftrace buffer at 0x100000..",
                path.display()
            )),
            "{err}"
        );
        assert!(err.contains(&format!("({layout}), 2 CPUs")), "{err}");
        assert!(
            err.contains("  cpu 1: 5 events in 1 sub-buffers, in the order its descriptor gives\n"),
            "{err}"
        );
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(
            lines.first(),
            Some(&"[    0.001112000] cpu0 pid 7: print: cpu0 marker 112")
        );
        assert_eq!(
            lines.last(),
            Some(&"[    1.075741824] cpu1 pid 8: print: cpu1 marker 4")
        );
        assert!(lines.contains(&"[    0.002000000] cpu1 pid 8: print: cpu1 marker 0"));
    }
}

#[test]
fn a_damaged_sub_buffer_is_said_and_sets_the_status() {
    // A page of CPU 0's ring whose commit runs past the page.
    let area = ftrace_area::seed_area(48);
    let mut mem = area.bytes.clone();
    let page = area.page_at(0, area.phys(0, 3));
    mem[page + 8..page + 16].copy_from_slice(&0x2000u64.to_le_bytes());
    let path = write_tmp("ftrace-damaged.img", &mem);
    let out = crashring(&["ftrace", path.to_str().unwrap(), "--ftrace", "0"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(" events in 4 sub-buffers, in the order its descriptor gives; 1 invalid, 0 not in the dump\n"),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "    sub-buffer {} at {page:#x}: commit 0x2000 is past the sub-buffer\n",
            area.phys(0, 3)
        )),
        "{err}"
    );
    assert!(text(&out.stdout).contains("cpu1 marker 4"));
}

#[test]
fn no_buffer_is_an_error_naming_the_input() {
    let path = write_tmp("ftrace-none.img", &[0u8; 8192]);
    let out = crashring(&["ftrace", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        format!(
            "crashring: {}: no persistent ftrace buffer found\n",
            path.display()
        )
    );
    let out = crashring(&["ftrace", path.to_str().unwrap(), "--ftrace", "0x1000:4K"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr)
        .ends_with("no persistent ftrace descriptor (magic 0xbadfeed) at 0x1000\n"));
}

#[test]
fn formats_name_events_and_a_directory_without_them_is_refused() {
    let path = write_tmp("ftrace-formats.img", &ftrace_area::seed(0x0018_0028));
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ftrace-events");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let out = crashring(&[
        "ftrace",
        path.to_str().unwrap(),
        "--ftrace-formats",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no event format in it"),
        "{}",
        text(&out.stderr)
    );
    // ftrace's own print event keeps its reading with a format for it.
    std::fs::create_dir_all(dir.join("ftrace/print")).unwrap();
    std::fs::write(
        dir.join("ftrace/print/format"),
        "name: print\nID: 5\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:char buf[];\toffset:16;\tsize:0;\tsigned:0;\n",
    )
    .unwrap();
    let out = crashring(&[
        "ftrace",
        path.to_str().unwrap(),
        "--ftrace-formats",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains(" print: cpu1 marker 4\n"));
}

#[test]
fn an_unreadable_buffer_beside_a_readable_one_sets_the_status() {
    // A good 6.12 buffer, then a page that signs as a 6.15 descriptor but
    // holds nothing else.
    let mut mem = ftrace_area::seed(56);
    let bad = mem.len().next_multiple_of(ftrace_area::PAGE);
    mem.resize(bad + ftrace_area::PAGE, 0);
    mem[bad..bad + 4].copy_from_slice(&0x0bad_feedu32.to_le_bytes());
    mem[bad + 4..bad + 8].copy_from_slice(&0x0018_0020u32.to_le_bytes());
    let path = write_tmp("ftrace-one-unreadable.img", &mem);
    let out = crashring(&["ftrace", path.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!(" {bad:#x}")), "{err}");
    assert!(text(&out.stdout).contains(" print: cpu1 marker 4\n"));
}

#[test]
fn region_options_are_not_offered() {
    let path = write_tmp("ftrace-phys.img", &ftrace_area::seed(56));
    for command in ["ftrace", "pstore", "dmesg"] {
        let out = crashring(&[command, path.to_str().unwrap(), "--phys", "0"]);
        assert_eq!(out.status.code(), Some(2), "{command}");
        assert!(
            text(&out.stderr).contains("unexpected argument '--phys'"),
            "{command}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn a_symbol_map_of_another_boot_names_function_entries() {
    // 6.12 saves where it put rb_meta_init_text_addr, 6.15+ where it put
    // _text: the seed's TEXT either way.
    // Where the writing boot put _text.
    for (word, base) in [
        (56, ftrace_area::TEXT - 0x500),
        (0x0018_0020, ftrace_area::TEXT),
    ] {
        let mut area = ftrace_area::Area::new(word, 1, 4);
        let entry = ftrace_area::function_entry(9, base + 0x1234 + 4, base + 0x2000 + 0x10);
        area.write(0, 1_000, &entry);
        let image = write_tmp(&format!("ftrace-fn-{word:x}.img"), &area.bytes);
        let map = write_tmp("kallsyms", ftrace_area::KALLSYMS.as_bytes());
        let args = |map: &std::path::Path| {
            crashring(&[
                "ftrace",
                image.to_str().unwrap(),
                "--ftrace",
                "0",
                "--symbols",
                map.to_str().unwrap(),
            ])
        };
        let out = args(&map);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{err}");
        assert!(
            text(&out.stdout).contains("cpu0 pid 9: function: f+0x4 <- g+0x10\n"),
            "{}",
            text(&out.stdout)
        );
        assert!(err.contains("code addresses named by the symbol map, placed by ftrace's saved "));
        // Without the map: the addresses.
        let out = crashring(&["ftrace", image.to_str().unwrap(), "--ftrace", "0"]);
        assert!(text(&out.stdout).contains(&format!("function: {:#x} <- ", base + 0x1238)));
    }
    // The stub Debian puts in /boot, and a map without 6.12's anchor.
    let area = {
        let mut area = ftrace_area::Area::new(56, 1, 4);
        area.write(0, 1_000, &ftrace_area::print_entry(1, "m"));
        area
    };
    let image = write_tmp("ftrace-fn-refused.img", &area.bytes);
    for (map, says) in [
        (
            "ffffffffffffffff B The real System.map is in the linux-image-<version>-dbg package\n",
            "no `_text` symbol",
        ),
        (
            "ffffffff9d000000 T _text\nffffffff9d001234 T f\n",
            "the map is of another kernel: it has no rb_meta_init_text_addr",
        ),
    ] {
        let map = write_tmp("refused-map", map.as_bytes());
        let out = crashring(&[
            "ftrace",
            image.to_str().unwrap(),
            "--ftrace",
            "0",
            "--symbols",
            map.to_str().unwrap(),
        ]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(says), "{err}");
    }
}
