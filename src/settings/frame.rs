//! The page inside a host page's iframe: which panels it shows, and whose messages it reads.
//! Parsed from the link (`embed=1&view=chart&host=https://handbook.example`), so part of
//! [`super::Link`]; the messages themselves are [`crate::embed`]'s.

/// Which part of the explorer a framed page shows (`view=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Panels {
    /// Everything, compactly.
    #[default]
    All,
    /// The d_model-vs-heads chart and the three claims.
    Chart,
    /// The heatmaps, one per head.
    Heads,
    /// Heatmaps with their toggles, and the drift they cause.
    Prune,
    /// The handbook's function, line by line, on the model's tensors.
    Code,
    /// Attention flow from the tokens to the output, and how pruning changes it.
    Flow,
}

impl Panels {
    /// Every view, in the order the documentation lists them.
    pub const ALL: [Panels; 6] =
        [Panels::All, Panels::Chart, Panels::Heads, Panels::Prune, Panels::Code, Panels::Flow];

    /// The `view=` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Panels::All => "all",
            Panels::Chart => "chart",
            Panels::Heads => "heads",
            Panels::Prune => "prune",
            Panels::Code => "code",
            Panels::Flow => "flow",
        }
    }

    /// Parses a `view=` value.
    pub fn parse(value: &str) -> Option<Panels> {
        Panels::ALL.into_iter().find(|v| v.as_str() == value)
    }

    /// Whether the view includes the config chart.
    pub fn shows_chart(self) -> bool {
        matches!(self, Panels::All | Panels::Chart)
    }

    /// Whether the view includes the per-head heatmaps.
    pub fn shows_heads(self) -> bool {
        matches!(self, Panels::All | Panels::Heads | Panels::Prune)
    }

    /// Whether the view includes the drift panel.
    pub fn shows_drift(self) -> bool {
        matches!(self, Panels::All | Panels::Prune)
    }

    /// Whether the view includes the code walk.
    pub fn shows_code(self) -> bool {
        matches!(self, Panels::All | Panels::Code)
    }

    /// Whether the view includes the attention-flow picture.
    pub fn shows_flow(self) -> bool {
        matches!(self, Panels::All | Panels::Prune | Panels::Flow)
    }
}

/// Whose messages the app accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostOrigin {
    /// Any origin (the embedder named none); the message must still come from the parent.
    Any,
    /// Only this origin (`https://handbook.example:8443`).
    Only(String),
    /// Nobody: the embedder named an origin that is not one, so nothing is trusted.
    Nobody,
}

impl HostOrigin {
    /// Reads a `host=` value; a malformed one trusts nobody rather than everybody (and is written
    /// back as `host=none`, so the page's own URL keeps that).
    pub fn parse(value: &str) -> (HostOrigin, Option<String>) {
        if value.trim() == "none" {
            return (HostOrigin::Nobody, None);
        }
        match normalize_origin(value) {
            Some(origin) => (HostOrigin::Only(origin), None),
            None => (
                HostOrigin::Nobody,
                Some(format!(
                    "host={} is not an origin like https://handbook.example; messages from the host page are ignored.",
                    super::query::shorten(value)
                )),
            ),
        }
    }

    /// Whether a message from `origin` may be read.
    pub fn allows(&self, origin: &str) -> bool {
        match self {
            HostOrigin::Any => true,
            HostOrigin::Only(allowed) => normalize_origin(origin).as_deref() == Some(allowed.as_str()),
            HostOrigin::Nobody => false,
        }
    }

    /// The `host=` value that reproduces this, if any.
    pub fn as_param(&self) -> Option<&str> {
        match self {
            HostOrigin::Any => None,
            HostOrigin::Only(origin) => Some(origin),
            HostOrigin::Nobody => Some("none"),
        }
    }
}

/// `scheme://host[:port]` in lower case, for `http` and `https` only; `None` for anything else
/// (paths, queries, credentials, spaces, other schemes, `null`).
fn normalize_origin(value: &str) -> Option<String> {
    let lower = value.trim().to_ascii_lowercase();
    let (scheme, rest) = lower.split_once("://")?;
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    // An IPv6 literal keeps its colons inside brackets; otherwise the last colon starts the port.
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (addr, after) = v6.split_once(']')?;
            let port = match after {
                "" => None,
                a => Some(a.strip_prefix(':')?),
            };
            (addr.chars().all(|c| c.is_ascii_hexdigit() || c == ':').then_some(addr)?, port)
        }
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    let host_ok = !host.is_empty()
        && host.len() <= 253
        && (authority.starts_with('[')
            || host.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-')));
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()));
    (matches!(scheme, "http" | "https") && host_ok && port_ok).then(|| format!("{scheme}://{authority}"))
}

/// How the page sits in a host page's iframe (`embed=1`, `view=`, `host=`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The part of the explorer shown.
    pub panels: Panels,
    /// Whose messages are read.
    pub host: HostOrigin,
}

impl Default for Frame {
    fn default() -> Self {
        Frame { panels: Panels::All, host: HostOrigin::Any }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_compared_normalised_and_a_bad_one_trusts_nobody() {
        let (host, note) = HostOrigin::parse("HTTPS://Handbook.Example:8443/");
        assert_eq!((host.clone(), note), (HostOrigin::Only("https://handbook.example:8443".into()), None));
        assert!(host.allows("https://handbook.example:8443"));
        assert!(!host.allows("https://handbook.example"));
        assert!(!host.allows("https://evil.example"));
        assert!(!host.allows("null"));
        for bad in [
            "",
            "handbook.example",
            "javascript:alert(1)",
            "https://a.example/path",
            "ftp://a.example",
            "https://u:p@a.example",
            "null",
            "https://a b",
            "http://[::1]x",
            "http://a.example:80x",
        ] {
            let (host, note) = HostOrigin::parse(bad);
            assert_eq!(host, HostOrigin::Nobody, "{bad}");
            assert!(note.is_some() && !host.allows("https://a.example"), "{bad}");
        }
        assert!(HostOrigin::Any.allows("https://anyone.example"));
        assert_eq!(HostOrigin::parse(HostOrigin::Nobody.as_param().unwrap()), (HostOrigin::Nobody, None));
        assert!(HostOrigin::parse("http://[::1]:8080").0.allows("http://[::1]:8080"));
    }

    #[test]
    fn panels_round_trip_and_say_what_they_show() {
        for v in Panels::ALL {
            assert_eq!(Panels::parse(v.as_str()), Some(v));
        }
        assert_eq!(Panels::parse("everything"), None);
        assert!(Panels::Chart.shows_chart() && !Panels::Chart.shows_heads() && !Panels::Chart.shows_drift());
        assert!(Panels::Prune.shows_heads() && Panels::Prune.shows_drift() && !Panels::Prune.shows_chart());
    }
}
