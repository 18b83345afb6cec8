//! Archives made here, entry by entry, each altered in one way a bundle
//! made elsewhere could be: the check refuses it, naming what it found.

use super::super::fixture::*;
use super::*;

fn layout_error(archive: &[u8]) -> String {
    match check(archive) {
        Err(e @ CheckError::Layout(_)) => e.to_string(),
        other => panic!("not a layout error: {other:?}"),
    }
}

#[test]
fn an_intact_bundle_and_its_padding_pass() {
    let checked = check(&gzip(&intact())[..]).unwrap();
    assert_eq!(checked.top, "b1");
    assert_eq!(checked.files.len(), 3);
    // As GNU tar writes it: padded with zeros to a 10240-byte record.
    let mut padded = intact();
    padded.resize(10240, 0);
    check(&gzip(&padded)[..]).unwrap();
}

#[test]
fn a_second_gzip_member_is_refused() {
    // The first member's tar has no end blocks: `tar xzf` reads on into
    // the second member, whose file would replace the checked one.
    let files = bundle_files(&[("dmesg.txt", b"[0.0] hi\n")]);
    let evil = tar_of(&[("dmesg.txt".into(), b"replaced\n".to_vec())]);
    let archive = [gzip(&tar_of(&files)), gzip(&[evil, END.to_vec()].concat())].concat();
    assert!(layout_error(&archive).contains("after the gzip member"));
    // Even an intact one, or zeros.
    let archive = [gzip(&intact()), gzip(&intact())].concat();
    assert!(layout_error(&archive).contains("after the gzip member"));
    let archive = [gzip(&intact()), vec![0; 10]].concat();
    assert!(layout_error(&archive).contains("after the gzip member"));
}

#[test]
fn data_after_the_tar_end_is_refused() {
    let mut archive = intact();
    archive.extend_from_slice(&tar_of(&[("dmesg.txt".into(), b"replaced\n".to_vec())]));
    assert!(layout_error(&gzip(&archive)).contains("after the tar archive's end"));
}

#[test]
fn a_pax_record_an_unpacker_would_act_on_is_refused() {
    let files = bundle_files(&[("dmesg.txt", b"[0.0] hi\n"), ("notes.txt", b"x")]);
    // What GNU tar and Python's tarfile write passes.
    let plain = tar_with(&files, |p, tar| {
        pax(
            tar,
            &[
                ("mtime", "1.5"),
                ("atime", "2"),
                ("path", &format!("b1/{p}")),
            ],
        )
    });
    check(&gzip(&[plain, END.to_vec()].concat())[..]).unwrap();
    // A sparse 1.0 file: GNU tar unpacks it as /tmp/evil.
    let sparse = tar_with(&files, |p, tar| {
        if p == "notes.txt" {
            pax(
                tar,
                &[("GNU.sparse.major", "1"), ("GNU.sparse.name", "/tmp/evil")],
            )
        }
    });
    match check(&gzip(&[sparse, END.to_vec()].concat())[..]) {
        Err(e @ CheckError::Unsafe { .. }) => {
            let e = e.to_string();
            assert!(e.starts_with("b1/notes.txt: "), "{e}");
            assert!(e.contains("record `GNU.sparse.major`"), "{e}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn more_entries_than_a_bundle_has_are_refused() {
    // Directories, so that only their number is wrong: the files are an
    // intact bundle's.
    let files = bundle_files(&[("dmesg.txt", b"[0.0] hi\n")]);
    let dirs = |n: usize| {
        tar_with(&files, |p, tar| {
            if p != "MANIFEST.json" {
                return;
            }
            for i in 0..n {
                dir(tar, &format!("b1/d{i}/"));
            }
        })
    };
    // b1/, the dirs, and 3 files.
    let at_most = dirs(MAX_ENTRIES - 4);
    check(&gzip_stored(&[at_most, END.to_vec()].concat())[..]).unwrap();
    let over = dirs(MAX_ENTRIES - 3);
    let e = layout_error(&gzip_stored(&[over, END.to_vec()].concat()));
    assert!(e.contains("over 100000 entries"), "{e}");
}

#[test]
fn what_the_archive_says_is_shown_escaped() {
    // A file that is in no list, named to clear the screen.
    let mut files = bundle_files(&[("dmesg.txt", b"[0.0] hi\n")]);
    files.push(("\x1b[2J\u{202e}x".into(), b"x".to_vec()));
    let e = check(&gzip(&[tar_of(&files), END.to_vec()].concat())[..])
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(r"\x1b[2J\xe2\x80\xaex: in the archive"),
        "{e}"
    );
    // A path only MANIFEST.json names, and a layout error quoting one.
    let mut files = bundle_files(&[("dmesg.txt", b"[0.0] hi\n")]);
    let mut m: serde_json::Value = serde_json::from_slice(&files[0].1).unwrap();
    m["files"][0]["path"] = "\u{9b}2J".into();
    files[0].1 = m.to_string().into_bytes();
    let e = check(&gzip(&[tar_of(&files), END.to_vec()].concat())[..])
        .unwrap_err()
        .to_string();
    assert!(e.starts_with(r"\xc2\x9b2J: listed in MANIFEST.json"), "{e}");
    let e = CheckError::Layout("\x07 is outside".into()).to_string();
    assert_eq!(e, r"\x07 is outside");
}

#[test]
fn a_file_and_a_directory_of_the_same_name_are_refused() {
    // GNU tar unpacks the directory over the checked file, or the file
    // over the directory.
    let files = bundle_files(&[("dmesg.txt", b"[0.0] hi\n")]);
    for before in ["dmesg.txt", "README.txt"] {
        let archive = tar_with(&files, |p, tar| {
            if p == before {
                dir(tar, "b1/dmesg.txt/");
            }
        });
        let e = layout_error(&gzip(&[archive, END.to_vec()].concat()));
        assert!(e.starts_with("b1/dmesg.txt"), "{e}");
        assert!(e.contains("both a file and a directory"), "{e}");
    }
    // A file under a directory of another name is no conflict.
    let archive = tar_with(&files, |p, tar| {
        if p == "dmesg.txt" {
            dir(tar, "b1/dmesg/");
        }
    });
    check(&gzip(&[archive, END.to_vec()].concat())[..]).unwrap();
}

#[test]
fn a_file_entry_named_as_a_directory_is_refused() {
    // GNU tar unpacks b1/dmesg.txt/ as a directory over the checked
    // b1/dmesg.txt, though its type says regular file.
    let files = bundle_files(&[("dmesg.txt", b"[0.0] hi\n"), ("dmesg.txt/", b"")]);
    let e = check(&gzip(&[tar_of(&files), END.to_vec()].concat())[..]).unwrap_err();
    assert!(matches!(e, CheckError::Unsafe { .. }), "{e:?}");
    let e = e.to_string();
    assert!(e.starts_with("b1/dmesg.txt/: a file entry"), "{e}");
}

#[test]
fn a_directory_entry_that_holds_data_is_refused_as_such() {
    let files = bundle_files(&[("dmesg.txt", b"[0.0] hi\n")]);
    let data = vec![b'x'; 2 << 20];
    let tar = tar_with(&files, |p, tar| {
        if p == "dmesg.txt" {
            let mut h = tar::Header::new_ustar();
            h.set_entry_type(tar::EntryType::Directory);
            h.set_size(data.len() as u64);
            tar.append_data(&mut h, "b1/logs/", &data[..]).unwrap();
        }
    });
    let e = check(&gzip(&[tar, END.to_vec()].concat())[..]).unwrap_err();
    assert!(matches!(e, CheckError::Unsafe { .. }), "{e:?}");
    assert!(e.to_string().contains("a directory entry holding"), "{e}");
}

#[test]
fn a_file_the_manifest_lists_twice_is_refused() {
    let mut files = bundle_files(&[("dmesg.txt", b"[0.0] hi\n")]);
    let mut m: serde_json::Value = serde_json::from_slice(&files[0].1).unwrap();
    let dmesg = m["files"][0].clone();
    assert_eq!(dmesg["path"], "dmesg.txt");
    m["files"].as_array_mut().unwrap().push(dmesg);
    files[0].1 = m.to_string().into_bytes();
    match check(&gzip(&[tar_of(&files), END.to_vec()].concat())[..]) {
        Err(e @ CheckError::Mismatch { .. }) => {
            assert_eq!(e.to_string(), "dmesg.txt: listed in MANIFEST.json twice");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_manifest_or_readme_over_the_cap_is_a_layout_error() {
    for (name, at) in [("MANIFEST.json", 0), ("README.txt", 2)] {
        let mut files = bundle_files(&[("dmesg.txt", b"[0.0] hi\n")]);
        assert_eq!(files[at].0, name);
        // Its size is all that matters: it is refused before it is read.
        files[at].1.resize(MAX_TEXT as usize + 1, b' ');
        let e = layout_error(&gzip_stored(&[tar_of(&files), END.to_vec()].concat()));
        assert_eq!(
            e,
            format!("b1/{name} is 16777217 bytes, over the 16777216 a bundle's {name} may have")
        );
    }
    // At the cap, a README is read (and then found to name the files).
    let mut files = bundle_files(&[("dmesg.txt", b"[0.0] hi\n")]);
    files[2].1.resize(MAX_TEXT as usize, b'x');
    let e = check(&gzip_stored(&[tar_of(&files), END.to_vec()].concat())[..]).unwrap_err();
    assert!(matches!(e, CheckError::Mismatch { .. }), "{e:?}");
}

#[test]
fn a_long_name_or_pax_header_past_the_cap_is_refused_unread() {
    let files = bundle_files(&[("dmesg.txt", b"[0.0] hi\n")]);
    // A GNU long name as long as the cap: the header before it, and the
    // padding before that, take the crate past it.
    let long = |p: &str, tar: &mut tar::Builder<Vec<u8>>| {
        if p == "README.txt" {
            let name = format!("b1/{}", "n".repeat(MAX_HEADERS as usize - 3));
            let mut h = tar::Header::new_gnu();
            h.set_size(1);
            tar.append_data(&mut h, name, &b"x"[..]).unwrap();
        }
    };
    let archive = [tar_with(&files, long), END.to_vec()].concat();
    let e = layout_error(&gzip_stored(&archive));
    assert_eq!(
        e,
        "over 1048576 bytes of tar headers after b1/dmesg.txt \
         (a long name or pax header that long is none of a bundle's)"
    );
    // So is a pax header, as the first thing in the archive.
    let mut tar = tar::Builder::new(Vec::new());
    let path = "p".repeat(MAX_HEADERS as usize);
    pax(&mut tar, &[("path", &path)]);
    let archive = [tar.into_inner().unwrap(), intact()].concat();
    let e = layout_error(&gzip_stored(&archive));
    assert!(e.contains("after the start"), "{e}");
    // A long name well inside the cap is read (here, to be refused as
    // a file no list names).
    let archive = tar_with(&files, |p, tar| {
        if p == "README.txt" {
            let mut h = tar::Header::new_gnu();
            h.set_size(1);
            let name = format!("b1/{}", "n".repeat(4000));
            tar.append_data(&mut h, name, &b"x"[..]).unwrap();
        }
    });
    let e = check(&gzip(&[archive, END.to_vec()].concat())[..]).unwrap_err();
    assert!(matches!(e, CheckError::Mismatch { .. }), "{e:?}");
}
