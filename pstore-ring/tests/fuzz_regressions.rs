//! Replays every input committed under `fuzz/regressions/` (crashes the
//! fuzzer found, and seeds worth keeping) through the fuzz target's body:
//! none may panic or hang, and each finding must still reach the code it
//! was named for (`fuzz/replay.rs`).

#[path = "../fuzz/harness.rs"]
mod harness;
#[path = "../fuzz/replay.rs"]
mod replay;

use replay::Finding;

/// What each finding's output must say. The `first-index-max` inputs
/// patch the base image of `harness.rs`: that the diagnostic names the
/// patched page's offset is what shows the patches still land on it.
const FINDINGS: &[Finding] = &[
    Finding {
        name: "lost-events-sum-overflow",
        says: &["cpu0: 0 events, at least 18446744073709551615 lost"],
    },
    // A closed page, its CRC patched to match, so the reader decodes it
    // rather than rejecting it as corrupt.
    Finding {
        name: "first-index-max",
        says: &[
            "page 0 at 0xd00: Intact seq 1 9 records",
            "stream 0 page 0 at region offset 0xd00: invalid field `first_index`: 18446744073709551615",
        ],
    },
    Finding {
        name: "open-page-first-index-max",
        says: &[
            "page 2 at 0x1200: Salvaged seq 3 2 records",
            "stream 1 page 2 at region offset 0x1200: invalid field `first_index`: 18446744073709551615",
        ],
    },
];

#[test]
fn committed_fuzz_inputs_reach_their_code_without_panic_or_hang() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions");
    replay::replay(&dir, FINDINGS, harness::run);
}
