//! Regions of the page sizes arm64 kernels run with besides 4 KiB: 16 KiB
//! and 64 KiB (Debian builds none, so no guest boots one here). The format
//! carries its page size in the header; the real binary must find such a
//! region in a dump at any 4 KiB boundary and recover every event as it
//! does a 4 KiB one's, pages overwritten and all.

mod common;
use common::{crashring, image_sized, write_tmp};

fn recovered(page_size: u32) {
    // Two streams of four pages, 12 000 events: the 16 KiB pages wrap,
    // the 64 KiB ones do not. The region sits 12 KiB into the dump.
    let events = 12_000u64;
    let image = image_sized(12 << 10, page_size, 16 * page_size as usize, events);
    let path = write_tmp(&format!("page-size-{page_size}.img"), &image);
    let path = path.to_str().unwrap();

    let info = crashring(&["info", path]);
    assert!(info.status.success(), "{info:?}");
    let text = String::from_utf8(info.stdout).unwrap();
    assert!(
        text.contains(&format!(", page size {page_size}\n")),
        "{text}"
    );
    let info = crashring(&["info", "--json", path]);
    let info: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    let region = &info["regions"][0];
    // Every event recovered or counted exactly as overwritten, the
    // crash among them.
    assert_eq!(region["lost_exact"], true, "{region}");
    let (recovered, lost) = (region["recovered"].as_u64(), region["lost"].as_u64());
    assert_eq!(
        recovered.zip(lost).map(|(r, l)| r + l),
        Some(events + 1),
        "{region}"
    );
    for stream in region["streams"].as_array().unwrap() {
        assert_eq!(
            stream["lost"], stream["lost_by_reason"]["overwritten"],
            "{stream}"
        );
    }

    let out = crashring(&["extract", "--format", "jsonl", path]);
    assert!(out.status.success(), "{out:?}");
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Every message that was not overwritten, once, in order, then the
    // crash.
    let messages: Vec<u64> = lines
        .iter()
        .filter_map(|l| {
            l["fields"]["text"]
                .as_str()?
                .strip_prefix("message ")?
                .parse()
                .ok()
        })
        .collect();
    let last = *messages.last().expect("no message recovered");
    assert_eq!(last, events - 1);
    for cpu in 0..2 {
        let own: Vec<u64> = messages.iter().copied().filter(|m| m % 2 == cpu).collect();
        assert!(
            own.windows(2).all(|w| w[1] == w[0] + 2),
            "cpu{cpu}'s messages skip or repeat"
        );
    }
    let overwritten: u64 = lines
        .iter()
        .filter(|l| l["kind"] == "loss" && l["reason"] == "overwritten")
        .filter_map(|l| l["events"].as_u64())
        .sum();
    assert_eq!(messages.len() as u64 + overwritten, events);
    assert_eq!(lines.last().unwrap()["type"], "crash");
}

#[test]
fn sixteen_kib_pages_are_read_by_the_header_s_page_size() {
    recovered(16 << 10);
}

#[test]
fn sixty_four_kib_pages_are_read_by_the_header_s_page_size() {
    recovered(64 << 10);
}
