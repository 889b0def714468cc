//! A read-only view of request headers, so verifiers and extractors need no HTTP crate.

/// Header name/value pairs as received. Names are matched case-insensitively.
#[derive(Debug, Default, Clone)]
pub struct Headers<'a> {
    pairs: Vec<(&'a str, &'a [u8])>,
}

impl<'a> Headers<'a> {
    /// The value of the first header called `name`, if it is present and valid UTF-8.
    ///
    /// A present but non-UTF-8 value reads as absent: every header we consume is ASCII,
    /// and a caller that needs it treats "absent" as an authentication or shape failure.
    pub fn get(&self, name: &str) -> Option<&'a str> {
        self.pairs
            .iter()
            .find(|(candidate, _)| candidate.eq_ignore_ascii_case(name))
            .and_then(|(_, value)| std::str::from_utf8(value).ok())
            .map(str::trim)
    }

    /// The first present header among `names`, tried in order (for aliases such as `svix-id`).
    pub(crate) fn get_any(&self, names: &[&str]) -> Option<&'a str> {
        names.iter().find_map(|name| self.get(name))
    }
}

impl<'a> FromIterator<(&'a str, &'a [u8])> for Headers<'a> {
    fn from_iter<I: IntoIterator<Item = (&'a str, &'a [u8])>>(iter: I) -> Self {
        Self {
            pairs: iter.into_iter().collect(),
        }
    }
}
