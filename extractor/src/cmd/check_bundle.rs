//! `crashring check-bundle`: a bundle checked as its recipient would.

use anyhow::{Context, Result};
use extractor::bundle::{self, CheckError};
use std::io;
use std::path::Path;

pub fn run(archive: &Path) -> Result<u8> {
    let file =
        std::fs::File::open(archive).with_context(|| format!("opening {}", archive.display()))?;
    match bundle::check(io::BufReader::new(file)) {
        Ok(checked) => {
            println!(
                "{}: intact: {}/ with {} files, each as MANIFEST.json says",
                archive.display(),
                checked.top,
                checked.files.len()
            );
            Ok(0)
        }
        Err(CheckError::Read(e)) => {
            Err(e).with_context(|| format!("reading {}", archive.display()))
        }
        Err(e) => {
            println!("{}: NOT intact: {e}", archive.display());
            Ok(1)
        }
    }
}
