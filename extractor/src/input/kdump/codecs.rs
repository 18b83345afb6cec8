//! Per-page decompression for kdump-compressed dumps.
//!
//! Every decoder writes into the caller's page buffer and must fill it
//! exactly: a stream that would produce more (a decompression bomb) or less
//! is an error, and no decoder allocates in proportion to what a stream
//! claims.

use std::io::Read;

/// makedumpfile's per-page compression flags (`page_desc.flags`).
pub const ZLIB: u32 = 0x01;
pub const LZO: u32 = 0x02;
pub const SNAPPY: u32 = 0x04;
pub const ZSTD: u32 = 0x20;

/// The name of a compression flag set, for messages and `info`.
pub fn name(flags: u32) -> &'static str {
    match flags & (ZLIB | LZO | SNAPPY | ZSTD) {
        0 => "none",
        ZLIB => "zlib",
        LZO => "lzo",
        SNAPPY => "snappy",
        ZSTD => "zstd",
        _ => "several",
    }
}

/// Decompresses one page stored with `flags` into `page`, which it must
/// fill exactly.
pub fn decompress_page(flags: u32, input: &[u8], page: &mut [u8]) -> Result<(), String> {
    let produced = match flags & (ZLIB | LZO | SNAPPY | ZSTD) {
        ZLIB => zlib(input, page)?,
        LZO => crate::input::kdump::lzo::decompress(input, page).map_err(|e| e.to_string())?,
        SNAPPY => snappy(input, page)?,
        ZSTD => zstd(input, page)?,
        other => return Err(format!("unknown compression flags {other:#x}")),
    };
    if produced != page.len() {
        return Err(format!(
            "{} stream gives {produced} bytes, the page has {}",
            name(flags),
            page.len()
        ));
    }
    Ok(())
}

fn zlib(input: &[u8], page: &mut [u8]) -> Result<usize, String> {
    use flate2::{Decompress, FlushDecompress, Status};
    let mut d = Decompress::new(true);
    match d.decompress(input, page, FlushDecompress::Finish) {
        Ok(Status::StreamEnd) => Ok(d.total_out() as usize),
        Ok(_) => Err("zlib stream does not end within the page".into()),
        Err(e) => Err(format!("zlib: {e}")),
    }
}

fn snappy(input: &[u8], page: &mut [u8]) -> Result<usize, String> {
    let claimed = snap::raw::decompress_len(input).map_err(|e| format!("snappy: {e}"))?;
    if claimed != page.len() {
        return Err(format!(
            "snappy stream claims {claimed} bytes, the page has {}",
            page.len()
        ));
    }
    snap::raw::Decoder::new()
        .decompress(input, page)
        .map_err(|e| format!("snappy: {e}"))
}

/// The largest zstd window accepted: makedumpfile compresses one page per
/// frame, so a bigger window only serves to make us allocate.
const ZSTD_MAX_WINDOW: u64 = 1 << 20;

fn zstd(input: &[u8], page: &mut [u8]) -> Result<usize, String> {
    let mut dec = ruzstd::decoding::FrameDecoder::new();
    dec.set_max_window_size(ZSTD_MAX_WINDOW);
    let mut src = input;
    dec.reset(&mut src).map_err(|e| format!("zstd: {e}"))?;
    let mut got = 0;
    loop {
        dec.decode_blocks(
            &mut src,
            ruzstd::decoding::BlockDecodingStrategy::UptoBytes(page.len() + 1),
        )
        .map_err(|e| format!("zstd: {e}"))?;
        got += dec
            .read(&mut page[got..])
            .map_err(|e| format!("zstd: {e}"))?;
        if dec.can_collect() > 0 {
            return Err(format!("zstd stream gives more than {} bytes", page.len()));
        }
        if dec.is_finished() {
            break;
        }
    }
    if !src.is_empty() {
        return Err(format!("zstd: {} bytes after the frame", src.len()));
    }
    Ok(got)
}
