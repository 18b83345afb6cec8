//! Streams from the kernel module's pool: `/dev/crashring`'s ioctl and
//! mapping (kernel/crashring_uapi.h), so a program's events are in the
//! region the kernel records, beside its CPUs', and survive a kernel
//! panic.

use memmap2::{Mmap, MmapMut, MmapOptions};
use pstore_ring::layout::{MAX_PAGE_SIZE, MIN_PAGE_SIZE};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;

pub const DEVICE: &str = "/dev/crashring";

/// `struct crashring_user_stream`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Request {
    pub name: [u8; 32],
    pub pages: u32,
    pub page_size: u32,
    pub index: u32,
    pub flags: u32,
    pub bytes: u64,
}

/// `_IOWR(0xC5, 1, struct crashring_user_stream)`, as asm-generic/ioctl.h
/// builds it.
pub(crate) const IOC_USER_STREAM: u64 =
    (3 << 30) | ((std::mem::size_of::<Request>() as u64) << 16) | (0xC5 << 8) | 1;

/// Categories a program names (`CRASHRING_USER_CATEGORIES`), and the
/// bytes of each name with its NUL (`CRASHRING_CATEGORY_NAME`).
pub const MAX_CATEGORIES: usize = 64;
pub(crate) const CATEGORY_NAME: usize = 32;

/// `struct crashring_user_categories`.
#[repr(C)]
pub(crate) struct Categories {
    pub count: u32,
    pub flags: u32,
    pub defaults: u64,
    pub names: [[u8; CATEGORY_NAME]; MAX_CATEGORIES],
}

/// `_IOW(0xC5, 2, struct crashring_user_categories)`.
pub(crate) const IOC_USER_CATEGORIES: u64 =
    (1 << 30) | ((std::mem::size_of::<Categories>() as u64) << 16) | (0xC5 << 8) | 2;

/// A stream the module handed to this process: its pages, mapped, and the
/// open file that holds it. Dropping it unmaps the pages and closes the
/// file, which gives the stream back to the pool.
pub(crate) struct Grant {
    pub map: MmapMut,
    /// Declared after `map`: the module frees the stream at the last close,
    /// which comes after the unmapping.
    file: File,
    pub index: u16,
    pub page_size: usize,
}

impl Grant {
    /// Names the program's categories for this stream, `defaults` the
    /// ones enabled while no selection names it, and maps the stream's
    /// control page read-only: its first 8 bytes are the enabled bits the
    /// kernel keeps.
    pub fn categories(&self, names: &[&str], defaults: u64) -> io::Result<Mmap> {
        let mut req = Categories {
            count: 0,
            flags: 0,
            defaults,
            names: [[0; CATEGORY_NAME]; MAX_CATEGORIES],
        };
        if names.len() > MAX_CATEGORIES || names.iter().any(|n| n.len() >= CATEGORY_NAME) {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        for (slot, name) in req.names.iter_mut().zip(names) {
            slot[..name.len()].copy_from_slice(name.as_bytes());
        }
        req.count = names.len() as u32;
        // SAFETY: the request is the struct the ioctl number names, valid
        // for the kernel to read.
        let rc = unsafe { libc::ioctl(self.file.as_raw_fd(), IOC_USER_CATEGORIES as _, &req) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the kernel maps its control page read-only; it changes
        // only the enabled word, which is read atomically.
        unsafe {
            MmapOptions::new()
                .offset(self.map.len() as u64)
                .len(page_size())
                .map(&self.file)
        }
    }
}

/// The machine's page size: the control page's length.
fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).unwrap_or(4096)
}

/// Asks the module for a stream named `name` of up to `pages` pages (0:
/// the pool's size) and maps it.
pub(crate) fn grant(name: &str, pages: u32) -> io::Result<Grant> {
    let file = OpenOptions::new().read(true).write(true).open(DEVICE)?;
    let mut req = Request {
        pages,
        ..Request::default()
    };
    let n = name.len().min(req.name.len() - 1);
    req.name[..n].copy_from_slice(&name.as_bytes()[..n]);
    // SAFETY: the request is the struct the ioctl number names, valid for
    // the kernel to read and write.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), IOC_USER_STREAM as _, &mut req) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let sizes = u64::from(MIN_PAGE_SIZE)..=u64::from(MAX_PAGE_SIZE);
    let page = u64::from(req.page_size);
    let index = u16::try_from(req.index).ok();
    let (Some(index), true) = (
        index,
        page.is_power_of_two()
            && sizes.contains(&page)
            && req.pages > 0
            && req.bytes == u64::from(req.pages) * page,
    ) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{DEVICE} answered an impossible stream: {req:?}"),
        ));
    };
    let len =
        usize::try_from(req.bytes).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
    // SAFETY: the module maps the stream's pages, which only this process
    // writes; what the kernel does with them afterwards (keep them for a
    // reader after a crash) never changes them under the writer.
    let map = unsafe { MmapOptions::new().len(len).map_mut(&file) }?;
    Ok(Grant {
        map,
        file,
        index,
        page_size: page as usize,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::process::Command;

    /// The requests and their ioctl numbers are the C header's, and the
    /// enabled word leads the control page: a C program built against
    /// kernel/crashring_uapi.h prints its view of them.
    #[test]
    fn the_request_is_the_uapi_headers() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("uapi.c");
        std::fs::write(
            &src,
            r#"#include <stddef.h>
#include <stdio.h>
#include "crashring_uapi.h"
int main(void)
{
	printf("%lu %zu %zu %zu %zu %zu %zu\n", (unsigned long)CRASHRING_IOC_USER_STREAM,
	       sizeof(struct crashring_user_stream),
	       offsetof(struct crashring_user_stream, pages),
	       offsetof(struct crashring_user_stream, page_size),
	       offsetof(struct crashring_user_stream, index),
	       offsetof(struct crashring_user_stream, flags),
	       offsetof(struct crashring_user_stream, bytes));
	printf("%lu %zu %zu %zu %zu %d %d %zu\n", (unsigned long)CRASHRING_IOC_USER_CATEGORIES,
	       sizeof(struct crashring_user_categories),
	       offsetof(struct crashring_user_categories, flags),
	       offsetof(struct crashring_user_categories, defaults),
	       offsetof(struct crashring_user_categories, names),
	       CRASHRING_USER_CATEGORIES, CRASHRING_CATEGORY_NAME,
	       offsetof(struct crashring_user_control, enabled));
	return 0;
}
"#,
        )
        .unwrap();
        let kernel = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kernel");
        let bin = dir.path().join("uapi");
        let ok = Command::new("cc")
            .arg("-I")
            .arg(&kernel)
            .arg(&src)
            .arg("-o")
            .arg(&bin)
            .status()
            .unwrap();
        assert!(ok.success());
        let out = String::from_utf8(Command::new(&bin).output().unwrap().stdout).unwrap();
        let r = Request::default();
        let base = std::ptr::addr_of!(r) as usize;
        let off = |p: *const u8| p as usize - base;
        let c = Categories {
            count: 0,
            flags: 0,
            defaults: 0,
            names: [[0; CATEGORY_NAME]; MAX_CATEGORIES],
        };
        let cbase = std::ptr::addr_of!(c) as usize;
        let coff = |p: *const u8| p as usize - cbase;
        let want = format!(
            "{} {} {} {} {} {} {}\n{} {} {} {} {} {MAX_CATEGORIES} {CATEGORY_NAME} 0\n",
            IOC_USER_STREAM,
            std::mem::size_of::<Request>(),
            off(std::ptr::addr_of!(r.pages).cast()),
            off(std::ptr::addr_of!(r.page_size).cast()),
            off(std::ptr::addr_of!(r.index).cast()),
            off(std::ptr::addr_of!(r.flags).cast()),
            off(std::ptr::addr_of!(r.bytes).cast()),
            IOC_USER_CATEGORIES,
            std::mem::size_of::<Categories>(),
            coff(std::ptr::addr_of!(c.flags).cast()),
            coff(std::ptr::addr_of!(c.defaults).cast()),
            coff(std::ptr::addr_of!(c.names).cast()),
        );
        assert_eq!(out, want);
    }
}
