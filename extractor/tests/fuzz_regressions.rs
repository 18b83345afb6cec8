//! Replays every input committed under `fuzz/regressions/TARGET/` (crashes
//! the fuzzers found, and seeds worth keeping) through that target's body:
//! none may panic or hang, and each finding must still reach the code it
//! was named for (`pstore-ring/fuzz/replay.rs`).

mod common;

use common::{ftrace_area, printk_ring, ramoops_area, synth};

#[path = "../fuzz/harness.rs"]
mod harness;
#[path = "../../pstore-ring/fuzz/replay.rs"]
mod replay;

use replay::Finding;

/// What each finding's output must say, by target.
fn findings(target: &str) -> &'static [Finding] {
    match target {
        // Patches flattened seed 1 so that one record lands near 1 TiB:
        // only the bytes the file holds may be present memory.
        "flattened" => &[Finding {
            name: "timeout-gaps-searched-as-memory",
            says: &["raw memory image, 1030792151740 bytes: 99236 bytes present"],
        }],
        // A DRM-shaped message: a negative `*` width left-justifies.
        "debug_message" => &[Finding {
            name: "drm-shaped",
            says: &["[drm:drm_atomic_commit] crtc-41 flip seq=7 HDMI-A-1 abc   ffff888012345678"],
        }],
        // Seeds: a request the service serves, one naming a path, one of
        // version 1 (served without the copy it asks for), and an answer
        // a copy follows.
        "request" => &[
            Finding {
                name: "well-formed",
                says: &["request Request { reason: \"black screen\", streams: [\"kiosk-ui\"], copy: true }"],
            },
            Finding {
                name: "unknown-key",
                says: &["refused request: line 3: unknown key \"path\""],
            },
            Finding {
                name: "version-1",
                says: &["request Request { reason: \"black screen\", streams: [], copy: false }"],
            },
            Finding {
                name: "answer-with-copy",
                says: &["copy_bytes: Some(18440)"],
            },
        ],
        // Seeds: the ring read from an ELF and a kdump-compressed vmcore,
        // and from an arm64 kernel's ELF vmcore.
        "printk" => &[
            Finding {
                name: "seed-elf",
                says: &["3 records, 3 unreadable, 5 failed"],
            },
            Finding {
                name: "seed-kdump",
                says: &["3 records, 3 unreadable, 5 failed"],
            },
            Finding {
                name: "seed-arm64-elf",
                says: &["3 records, 3 unreadable, 5 failed"],
            },
        ],
        // Seeds: the area read by its own layout, and by one with ECC
        // (whose smaller buffers refuse the full zones); the ECC area with
        // its parity, read by the ECC layout.
        "ramoops" => &[
            Finding {
                name: "seed-area",
                says: &[
                    "dmesg-ramoops-1: 42 bytes, written at 1700000000.123456, stored compressed",
                    "CPU:1 ts:77 0xffffffff81000010 <- 0xffffffff81000020",
                ],
            },
            Finding {
                name: "seed-ecc",
                says: &["console-ramoops-0: invalid header"],
            },
            Finding {
                name: "seed-ecc-parity",
                says: &[
                    "dmesg-ramoops-0: 11890 bytes, written at 1700000000.123456, stored compressed, ECC: no errors",
                    "console-ramoops-0: 7252 bytes, wrapped, ECC: no errors",
                    "pmsg-ramoops-0: 25 bytes, ECC: no errors",
                ],
            },
        ],
        // Seed: five of 6.12's formats, an event of each described.
        "ftrace_formats" => &[Finding {
            name: "seed-6.12",
            says: &[
                "irq_handler_entry: irq=-1754116824 name=(past the event)",
                "sched_switch: prev_comm=(Mr",
            ],
        }],
        // Seed: a 6.12 guest's kallsyms lines, placed 2 MiB higher; past
        // _etext an address stays a number.
        "bert" => &[Finding {
            name: "seed-memory-errors",
            says: &[
                "fatal platform memory error, physical address 0x76543000, node 1, multi-bit ECC",
                "corrected platform memory error, physical address 0x2000, node 1, scrub corrected error",
            ],
        }],
        "symbol_map" => &[Finding {
            name: "seed-6.12-kallsyms",
            says: &[
                "function: _text+0x4 <- _text",
                "function: rb_meta_init_text_addr+0x5d83e4 <- _text",
                "function: 0xffffffffbca00004 <- _text",
            ],
        }],
        // Seeds: a buffer in each layout, CPU 0 gone round its ring.
        "ftrace" => &[
            Finding {
                name: "seed-6.12",
                says: &["0x0: Linux 6.12 layout", "[1] 2000000 print: cpu1 marker 0"],
            },
            Finding {
                name: "seed-6.13",
                says: &["0x0: Linux 6.13-6.14 layout", "[0] 1599000 print: cpu0 marker 599"],
            },
            Finding {
                name: "seed-6.15",
                says: &["0x0: Linux 6.15+ layout", "cpu 1: in the order its descriptor gives"],
            },
            Finding {
                name: "seed-6.15-counts",
                says: &["0x0: Linux 6.15+ (with test counts) layout", "[1] 1075741824 print: cpu1 marker 4"],
            },
        ],
        // Seed: a bundle's manifest and JSON lines. Then hostile lines:
        // a time past i64 and a level past i32 (kept, clamped and
        // dropped), a loss without a count, bytes that are no UTF-8, a
        // stream past u16.
        "export" => &[
            Finding {
                name: "seed-rich-bundle",
                says: &[
                    "1 crashes rows, filed under 2026-11-18",
                    "Str(\"signage-7\") Str(\"panic\") Str(\"b9ec26de920d7bf6\")",
                    "189 events rows, 0 lines left out",
                ],
            },
            Finding {
                name: "hostile-lines",
                says: &[
                    "first event: I64(9223372036854775807) Str(\"x\") Null Str(\"t\")",
                    // The text that is no Unicode (a lone surrogate) costs
                    // its event the text only.
                    "2 events rows, 3 lines left out",
                ],
            },
        ],
        // A raw file smaller than any region.
        "open_dump" => &[Finding {
            name: "raw-short",
            says: &["raw memory image, 6 bytes: 6 bytes present"],
        }],
        _ => &[],
    }
}

#[test]
fn committed_fuzz_inputs_reach_their_code_without_panic_or_hang() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions");
    for (name, target) in harness::Target::ALL {
        replay::replay(&dir.join(name), findings(name), move |data| {
            harness::run(target, data)
        });
    }
}
