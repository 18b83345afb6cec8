//! `crashring debug`: which kernel debug messages the module diverts into
//! the recorder instead of printk (its sysfs `debug`), and which of their
//! own categories programs record into their user streams; the callsites
//! and categories to choose from (DRM's, dynamic debug's control file,
//! the running programs'); and the choice kept across boots
//! (kexec-hooks' `debug`).

use super::arm::{carry_out, ChangeArgs};
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use kexec_hooks::debug::{plan_persist, Enable};
use kexec_hooks::system::System;
use pstore_ring::read::drm_category_name;

/// The module's selection, and what it diverts.
const SYSFS: &str = "/sys/kernel/crashring/debug";
/// Dynamic debug's control file, procfs first (it needs no debugfs).
const CONTROL: [&str; 2] = [
    "/proc/dynamic_debug/control",
    "/sys/kernel/debug/dynamic_debug/control",
];

#[derive(Args)]
pub struct DebugArgs {
    #[command(subcommand)]
    what: Option<DebugCmd>,
}

#[derive(Subcommand)]
enum DebugCmd {
    /// What is selected and what the module diverts (the default).
    Show {
        #[arg(long, value_name = "DIR", default_value = "/")]
        root: std::path::PathBuf,
    },
    /// DRM's categories, the categories of programs recording into the
    /// module's user streams (+ where recorded), and every dynamic-debug
    /// callsite of the running kernel, as file:line [module]function
    /// "format", marked `=p` where dynamic debug enabled it and `input`
    /// where it can carry typed text.
    List {
        /// Only callsites whose line contains this.
        filter: Option<String>,
        #[arg(long, value_name = "DIR", default_value = "/")]
        root: std::path::PathBuf,
    },
    /// Divert these messages into the recorder (root): drm=CATEGORY,...
    /// module=M func=F file=PATH[:LINE] device=NAME; and record these
    /// categories of a program's own: user=NAME:CATEGORY,...|all (the
    /// others it stops recording; a program no word names records its
    /// defaults). Dynamic debug is told to enable the callsites named (+p:
    /// the kernel calls it only for those); what the module does not
    /// divert goes to printk as ever. The words replace the selection.
    Select {
        #[arg(required = true, value_name = "WORD")]
        words: Vec<String>,
        /// Send the selected messages to printk too.
        #[arg(long)]
        printk: bool,
        /// Allow callsites of the input layer (input core, HID, keyboards,
        /// touch), whose messages can carry what a person typed.
        #[arg(long)]
        input: bool,
        /// Keep the selection across boots (module options beside arm's).
        #[arg(long)]
        persist: bool,
        #[command(flatten)]
        how: ChangeArgs,
    },
    /// Divert nothing (and with --persist, forget the kept selection).
    Clear {
        #[arg(long)]
        persist: bool,
        #[command(flatten)]
        how: ChangeArgs,
    },
}

pub fn run(args: DebugArgs) -> Result<u8> {
    match args.what.unwrap_or(DebugCmd::Show { root: "/".into() }) {
        DebugCmd::Show { root } => {
            let sys = System::new(root);
            print!("{}", read(&sys, SYSFS)?);
            Ok(0)
        }
        DebugCmd::List { filter, root } => list(&System::new(root), filter.as_deref()),
        DebugCmd::Select {
            words,
            printk,
            input,
            persist,
            how,
        } => {
            let rules = words
                .iter()
                .map(|w| Rule::parse(w))
                .collect::<Result<Vec<_>>>()?;
            if let Some(r) = rules.iter().find(|r| r.is_input()) {
                if !input {
                    bail!("{} names input-layer callsites, whose messages can carry what a person typed: give --input to select them", r.word);
                }
            }
            let flags = [(printk, "printk"), (input, "input")];
            let mut all: Vec<&str> = words.iter().map(String::as_str).collect();
            all.extend(flags.iter().filter(|f| f.0).map(|f| f.1));
            apply(&System::new(&how.root), &all, &rules, persist, &how)
        }
        DebugCmd::Clear { persist, how } => apply(&System::new(&how.root), &[], &[], persist, &how),
    }
}

fn read(sys: &System, path: &str) -> Result<String> {
    sys.read(path)
        .with_context(|| format!("reading {}", sys.path(path).display()))?
        .with_context(|| {
            format!(
                "{} is missing: is crashring.ko loaded?",
                sys.path(path).display()
            )
        })
}

/// One dynamic-debug callsite, a line of the control file.
#[derive(Debug, PartialEq, Eq)]
struct Site<'a> {
    file: &'a str,
    line: u32,
    module: &'a str,
    function: &'a str,
    enabled: bool,
    line_text: &'a str,
}

/// `path:line [module]function flags "format"`; the header line and
/// anything else, `None`.
fn parse_site(line: &str) -> Option<Site<'_>> {
    let (place, rest) = line.split_once(' ')?;
    let (file, number) = place.rsplit_once(':')?;
    let rest = rest.strip_prefix('[')?;
    let (module, rest) = rest.split_once(']')?;
    let (function, rest) = rest.split_once(' ')?;
    let flags = rest.split_whitespace().next()?;
    Some(Site {
        file,
        line: number.parse().ok()?,
        module,
        function,
        enabled: flags.contains('p'),
        line_text: line,
    })
}

/// What a callsite's file says of it: the input layer's?
fn input_file(file: &str) -> bool {
    file.contains("drivers/input/") || file.contains("drivers/hid/")
}

fn list(sys: &System, filter: Option<&str>) -> Result<u8> {
    println!("DRM categories (drm=NAME,...):");
    let names: Vec<&str> = (0..).map_while(drm_category_name).collect();
    println!("  {}", names.join(" "));
    if let Some(selection) = sys
        .read(SYSFS)
        .with_context(|| format!("reading {}", sys.path(SYSFS).display()))?
    {
        println!("programs' categories (user=NAME:CATEGORY,...; + recorded now):");
        for line in selection.lines().filter_map(|l| l.strip_prefix("user ")) {
            println!("  {line}");
        }
    }
    let Some(control) = control(sys)? else {
        println!("no dynamic debug control file: this kernel has no dynamic debug");
        return Ok(0);
    };
    println!("dynamic-debug callsites (file=PATH:LINE, func=F, module=M):");
    for site in control.lines().filter_map(parse_site) {
        if filter.is_some_and(|f| !site.line_text.contains(f)) {
            continue;
        }
        let input = if input_file(site.file) || site.module.starts_with("hid") {
            " (input)"
        } else {
            ""
        };
        println!("  {}{input}", site.line_text);
    }
    Ok(0)
}

fn control(sys: &System) -> Result<Option<String>> {
    for path in CONTROL {
        if let Some(text) = sys
            .read(path)
            .with_context(|| format!("reading {}", sys.path(path).display()))?
        {
            return Ok(Some(text));
        }
    }
    Ok(None)
}

/// A selection word about dynamic-debug callsites.
struct Rule<'w> {
    word: &'w str,
    /// The dynamic debug query that names its callsites, if it names any.
    query: Option<String>,
}

impl<'w> Rule<'w> {
    fn parse(word: &'w str) -> Result<Rule<'w>> {
        let (key, value) = word.split_once('=').with_context(|| {
            format!("`{word}`: give drm=, module=, func=, file=, device= or user=")
        })?;
        let query = match key {
            "drm" => {
                for name in value.split(',') {
                    let known = name.eq_ignore_ascii_case("all")
                        || pstore_ring::read::drm_category_bit(name).is_some();
                    if !known {
                        bail!("`{name}` is not a DRM category: `crashring debug list` names them");
                    }
                }
                None
            }
            "device" => None,
            "user" => {
                let categories = value.split_once(':').map(|(name, c)| (name, c.split(',')));
                let Some((name, mut categories)) = categories.filter(|(n, _)| !n.is_empty()) else {
                    bail!("`{word}`: give user=NAME:CATEGORY,... (a program's stream name, then its categories or `all`)");
                };
                if let Some(bad) = categories.find(|c| c.is_empty() || c.len() > 31) {
                    bail!("`{word}`: `{bad}` is no category of {name}'s");
                }
                None
            }
            "module" => Some(format!("module {value}")),
            "func" => Some(format!("func {value}")),
            "file" => Some(match value.rsplit_once(':') {
                Some((file, line)) if line.parse::<u32>().is_ok() => {
                    format!("file {file} line {line}")
                }
                _ => format!("file {value}"),
            }),
            _ => bail!("`{word}`: give drm=, module=, func=, file=, device= or user="),
        };
        Ok(Rule { word, query })
    }

    /// Whether it names input-layer callsites (as the module refuses).
    fn is_input(&self) -> bool {
        match self.word.split_once('=') {
            Some(("module", m)) => {
                m.starts_with("hid")
                    || ["usbhid", "atkbd", "psmouse", "evdev", "i8042"].contains(&m)
            }
            Some(("file", f)) => f.starts_with("drivers/input/") || f.starts_with("drivers/hid/"),
            _ => false,
        }
    }

    /// Whether `site` is one of its callsites.
    fn names(&self, site: &Site) -> bool {
        match self.word.split_once('=') {
            Some(("module", m)) => site.module == m,
            Some(("func", f)) => site.function == f,
            Some(("file", f)) => {
                let (path, line) = match f.rsplit_once(':') {
                    Some((p, l)) => (p, l.parse::<u32>().ok()),
                    None => (f, None),
                };
                (site.file == path || site.file.ends_with(&format!("/{path}")))
                    && line.is_none_or(|l| l == site.line)
            }
            _ => false,
        }
    }
}

/// Tells dynamic debug and the module, then keeps it if asked.
fn apply(
    sys: &System,
    words: &[&str],
    rules: &[Rule],
    persist: bool,
    how: &ChangeArgs,
) -> Result<u8> {
    let selection = words.join(" ");
    let queries: Vec<String> = rules
        .iter()
        .filter_map(|r| Some(format!("{} +p", r.query.as_ref()?)))
        .collect();
    // Read before anything is written: which module each rule's callsites
    // are in.
    let plan = match persist {
        true => Some(plan_persist(sys, &selection, &enables(sys, rules)?)?),
        false => None,
    };
    if how.dry_run {
        for q in &queries {
            println!("# dynamic debug: {q}");
        }
        println!("# {SYSFS}: {selection}");
    } else {
        let control_path = CONTROL.iter().find(|p| sys.path(p).exists()).copied();
        for q in &queries {
            let Some(path) = control_path else {
                bail!("no dynamic debug control file: `{q}` cannot be enabled");
            };
            // No match (its module not loaded yet) is no error: with
            // --persist its module enables it when it loads.
            if let Err(e) = std::fs::write(sys.path(path), q) {
                eprintln!("crashring: dynamic debug did not take `{q}`: {e}");
            }
        }
        std::fs::write(sys.path(SYSFS), &selection)
            .with_context(|| format!("the module refused `{selection}` ({SYSFS})"))?;
        eprintln!("crashring: selected `{selection}`");
    }
    if let Some(plan) = plan {
        carry_out(&plan, how, sys)?;
    }
    Ok(0)
}

/// What each module must enable at its load for `rules`: the modules
/// whose loaded callsites a rule names (a module= rule names its module
/// even unloaded).
fn enables(sys: &System, rules: &[Rule]) -> Result<Vec<Enable>> {
    let control = control(sys)?.unwrap_or_default();
    let mut enables = Vec::new();
    for rule in rules {
        let Some(query) = &rule.query else { continue };
        let named = rule.word.strip_prefix("module=");
        let mut modules: Vec<&str> = control
            .lines()
            .filter_map(parse_site)
            .filter(|s| rule.names(s))
            .map(|s| s.module)
            .collect();
        modules.dedup();
        if let Some(m) = named.filter(|_| modules.is_empty()) {
            modules.push(m);
        }
        if modules.is_empty() {
            eprintln!(
                "crashring: no loaded callsite matches {}: enable it at boot by hand (its module's dyndbg= option)",
                rule.word
            );
        }
        for module in modules {
            enables.push(Enable {
                module: module.into(),
                // A module's own dyndbg= option needs no "module M".
                query: if named.is_some() {
                    String::new()
                } else {
                    query.clone()
                },
                builtin: !sys
                    .path(&format!("/sys/module/{module}/initstate"))
                    .exists(),
            });
        }
    }
    Ok(enables)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_lines_parse() {
        let line = r#"drivers/net/e1000/e1000_main.c:77 [e1000]e1000_watchdog =p "link %s\n""#;
        let site = parse_site(line).unwrap();
        assert_eq!(
            (
                site.file,
                site.line,
                site.module,
                site.function,
                site.enabled
            ),
            (
                "drivers/net/e1000/e1000_main.c",
                77,
                "e1000",
                "e1000_watchdog",
                true
            )
        );
        assert_eq!(
            parse_site("# filename:lineno [module]function flags format"),
            None
        );
    }

    #[test]
    fn words_become_queries_and_name_their_callsites() {
        let line = r#"drivers/net/e1000/e1000_main.c:77 [e1000]e1000_watchdog =_ "link %s\n""#;
        let site = parse_site(line).unwrap();
        for (word, query, names) in [
            (
                "file=e1000_main.c:77",
                Some("file e1000_main.c line 77"),
                true,
            ),
            (
                "file=e1000_main.c:78",
                Some("file e1000_main.c line 78"),
                false,
            ),
            ("file=main.c", Some("file main.c"), false),
            ("func=e1000_watchdog", Some("func e1000_watchdog"), true),
            ("module=e1000", Some("module e1000"), true),
            ("drm=KMS,atomic", None, false),
            ("device=eth0", None, false),
            ("user=weston:drm,input", None, false),
        ] {
            let r = Rule::parse(word).unwrap();
            assert_eq!(r.query.as_deref(), query, "{word}");
            assert_eq!(r.names(&site), names, "{word}");
        }
        assert!(Rule::parse("drm=KMS,NOPE").is_err());
        assert!(Rule::parse("file").is_err());
        for bad in [
            "user=weston",
            "user=:drm",
            "user=weston:",
            "user=weston:a,,b",
        ] {
            assert!(Rule::parse(bad).is_err(), "{bad}");
        }
        assert!(Rule::parse("module=hid_generic").unwrap().is_input());
        assert!(Rule::parse("file=drivers/input/keyboard/atkbd.c:1")
            .unwrap()
            .is_input());
    }
}
