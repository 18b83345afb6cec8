//! Replays every input committed under `fuzz/regressions/` (crashes the
//! fuzzer found, and seeds worth keeping) through the fuzz target's body.
//! The only assertion is the fuzz property: no panic.

#[path = "../fuzz/harness.rs"]
mod harness;

#[test]
fn committed_fuzz_inputs_do_not_panic() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        eprintln!("replaying {}", path.display());
        harness::run(&data);
        n += 1;
    }
    assert!(n > 0, "no inputs in {}", dir.display());
}
