//! Replays every input committed under `fuzz/regressions/TARGET/` (crashes
//! the fuzzers found, and seeds worth keeping) through that target's body.
//! The only assertion is the fuzz property: no panic.

mod common;

use common::synth;

#[path = "../fuzz/harness.rs"]
mod harness;

#[test]
fn committed_fuzz_inputs_do_not_panic() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions");
    for (name, target) in harness::Target::ALL {
        let mut n = 0;
        for entry in std::fs::read_dir(dir.join(name)).unwrap() {
            let path = entry.unwrap().path();
            let data = std::fs::read(&path).unwrap();
            eprintln!("replaying {}", path.display());
            harness::run(target, &data);
            n += 1;
        }
        assert!(n > 0, "no inputs for {name} in {}", dir.display());
    }
}
