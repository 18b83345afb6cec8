//! `crashring check-bundle`: a bundle checked as its recipient would.

use anyhow::{anyhow, Context, Result};
use extractor::bundle::{self, escaped, CheckError};
use std::io;
use std::path::Path;

pub fn run(archive: &Path) -> Result<u8> {
    // A bundle's file name, like everything in it, is someone else's.
    let name = escaped(&archive.to_string_lossy());
    let file = std::fs::File::open(archive).with_context(|| format!("opening {name}"))?;
    match bundle::check(io::BufReader::new(file)) {
        Ok(checked) => {
            println!(
                "{name}: intact: {}/ with {} files, each as MANIFEST.json says",
                escaped(&checked.top),
                checked.files.len()
            );
            Ok(0)
        }
        Err(CheckError::Read(e)) => Err(anyhow!("reading {name}: {}", escaped(&e.to_string()))),
        Err(e) => {
            println!("{name}: NOT intact: {e}");
            Ok(1)
        }
    }
}
