//! A few JSON-pointer fields (RFC 6901) read from a verified body in one streaming pass,
//! without building a tree: a body of many tiny values would otherwise grow ~16× as a
//! `serde_json::Value`, outside the body budget. Only the nodes on a pointer's path are
//! looked into; everything else is skipped as it is parsed.
//!
//! A field is a string (unescaped), or a number or boolean *as written*: a number is never
//! converted, so `18446744073709551616` (beyond u64) and `18446744073709551617` stay two
//! values, where an f64 would render both alike. `null`, objects and arrays are no field.
//! A key on a pointer's path that appears twice in one object is refused: which of the two
//! a reader takes is a choice the sender could exploit.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

/// Why the fields could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PointerError {
    /// The body is not JSON (the storability check runs first, so this is a bug's sign).
    #[error("the body is not JSON")]
    Syntax,
    /// A key on a pointer's path appears twice in one object.
    #[error("a field appears twice")]
    DuplicateKey,
}

/// The fields at `pointers` in `json`, in order: `None` where nothing (or a `null`, an
/// object or an array) is there. Each pointer starts with `/` (the configuration checks).
pub(crate) fn read_fields<'a>(
    json: &'a str,
    pointers: &[&str],
) -> Result<Vec<Option<Cow<'a, str>>>, PointerError> {
    let paths: Vec<Vec<Cow<'_, str>>> = pointers.iter().map(|pointer| tokens(pointer)).collect();
    let mut found = vec![None; paths.len()];
    let mut duplicate = false;
    let node = Node {
        paths: &paths,
        active: (0..paths.len()).collect(),
        depth: 0,
        found: &mut found,
        duplicate: &mut duplicate,
    };
    let mut deserializer = serde_json::Deserializer::from_str(json);
    let parsed = node
        .deserialize(&mut deserializer)
        .and_then(|()| deserializer.end());
    match parsed {
        Ok(()) => Ok(found),
        Err(_) if duplicate => Err(PointerError::DuplicateKey),
        Err(_) => Err(PointerError::Syntax),
    }
}

/// A pointer's reference tokens, `~1` and `~0` unescaped.
fn tokens(pointer: &str) -> Vec<Cow<'_, str>> {
    pointer
        .split('/')
        .skip(1)
        .map(|token| {
            if token.contains('~') {
                Cow::Owned(token.replace("~1", "/").replace("~0", "~"))
            } else {
                Cow::Borrowed(token)
            }
        })
        .collect()
}

/// Whether `token` names array element `index` (RFC 6901: digits, no leading zero).
fn names_index(token: &str, index: usize) -> bool {
    let canonical = token == "0" || (!token.starts_with('0') && !token.is_empty());
    canonical && token.bytes().all(|byte| byte.is_ascii_digit()) && token.parse() == Ok(index)
}

/// One JSON value and the pointers whose path passes through it.
struct Node<'s, 'p, 'a> {
    paths: &'s [Vec<Cow<'p, str>>],
    /// Indices into `paths` of the pointers that reach this node.
    active: Vec<usize>,
    /// How many tokens led here.
    depth: usize,
    found: &'s mut Vec<Option<Cow<'a, str>>>,
    /// Set when a key on a path repeats (the parse is then abandoned).
    duplicate: &'s mut bool,
}

impl<'s, 'p, 'a> Node<'s, 'p, 'a> {
    fn child(&mut self, active: Vec<usize>) -> Node<'_, 'p, 'a> {
        Node {
            paths: self.paths,
            active,
            depth: self.depth + 1,
            found: self.found,
            duplicate: self.duplicate,
        }
    }
}

impl<'de: 'a, 'a> DeserializeSeed<'de> for Node<'_, '_, 'a> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        if self.active.is_empty() {
            IgnoredAny::deserialize(deserializer)?;
            return Ok(());
        }
        let ends_here = self
            .active
            .iter()
            .any(|&index| self.paths[index].len() == self.depth);
        if !ends_here {
            return deserializer.deserialize_any(self);
        }
        // A field ends here: keep the value's text as written, then (rarely: one pointer
        // is a prefix of another) look inside it for the longer ones.
        let raw: &'de RawValue = Deserialize::deserialize(deserializer)?;
        let scalar = scalar_text(raw.get()).map_err(de::Error::custom)?;
        let (here, deeper): (Vec<usize>, Vec<usize>) = self
            .active
            .iter()
            .copied()
            .partition(|&index| self.paths[index].len() == self.depth);
        for index in here {
            self.found[index] = scalar.clone();
        }
        if !deeper.is_empty() {
            let mut inner = serde_json::Deserializer::from_str(raw.get());
            Node {
                active: deeper,
                ..self
            }
            .deserialize(&mut inner)
            .map_err(de::Error::custom)?;
        }
        Ok(())
    }
}

/// A string's text, a number's or boolean's text as written; `None` for the rest.
pub(crate) fn scalar_text(raw: &str) -> Result<Option<Cow<'_, str>>, serde_json::Error> {
    match raw.as_bytes().first() {
        Some(b'"') => {
            let mut string = serde_json::Deserializer::from_str(raw);
            string.deserialize_str(TextVisitor).map(Some)
        }
        Some(b'-' | b'0'..=b'9' | b't' | b'f') if raw != "null" => Ok(Some(Cow::Borrowed(raw))),
        _ => Ok(None),
    }
}

impl<'de: 'a, 'a> Visitor<'de> for Node<'_, '_, 'a> {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_map<M: MapAccess<'de>>(mut self, mut map: M) -> Result<(), M::Error> {
        let mut matched: Vec<Cow<'de, str>> = Vec::new();
        while let Some(key) = map.next_key_seed(TextVisitor)? {
            let active: Vec<usize> = self
                .active
                .iter()
                .copied()
                .filter(|&index| self.paths[index][self.depth] == key)
                .collect();
            if !active.is_empty() {
                if matched.contains(&key) {
                    *self.duplicate = true;
                    return Err(de::Error::custom("a field appears twice"));
                }
                matched.push(key);
            }
            map.next_value_seed(self.child(active))?;
        }
        Ok(())
    }

    fn visit_seq<S: SeqAccess<'de>>(mut self, mut sequence: S) -> Result<(), S::Error> {
        let mut index = 0;
        loop {
            let active: Vec<usize> = self
                .active
                .iter()
                .copied()
                .filter(|&path| names_index(self.paths[path][self.depth].as_ref(), index))
                .collect();
            if sequence.next_element_seed(self.child(active))?.is_none() {
                return Ok(());
            }
            index += 1;
        }
    }

    // A scalar where a path goes deeper: nothing is there.
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
}

/// A string, borrowed from the body when it holds no escape.
struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Cow<'de, str>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a string")
    }

    fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(text))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(text.to_owned()))
    }
}

impl<'de> DeserializeSeed<'de> for TextVisitor {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: &str, pointers: &[&str]) -> Vec<Option<String>> {
        read_fields(json, pointers)
            .expect("readable")
            .into_iter()
            .map(|field| field.map(Cow::into_owned))
            .collect()
    }

    #[test]
    fn strings_numbers_and_booleans_are_read_as_written() {
        let json = r#"{"a":{"b":"x\u0041y","n":-1.50e3,"t":true,"z":null,"o":{},"l":[]},"c":[10,{"d":"e"}]}"#;
        assert_eq!(
            read(
                json,
                &[
                    "/a/b", "/a/n", "/a/t", "/a/z", "/a/o", "/a/l", "/c/1/d", "/c/0"
                ]
            ),
            [
                Some("xAy".to_owned()),
                Some("-1.50e3".to_owned()),
                Some("true".to_owned()),
                None,
                None,
                None,
                Some("e".to_owned()),
                Some("10".to_owned()),
            ]
        );
    }

    #[test]
    fn numbers_beyond_u64_keep_their_exact_text() {
        // Both round to the same f64 (1.8446744073709552e19).
        let first = read(r#"{"id":18446744073709551616}"#, &["/id"]);
        let second = read(r#"{"id":18446744073709551617}"#, &["/id"]);
        assert_eq!(first, [Some("18446744073709551616".to_owned())]);
        assert_eq!(second, [Some("18446744073709551617".to_owned())]);
    }

    #[test]
    fn missing_paths_and_scalars_in_the_way_find_nothing() {
        let json = r#"{"a":1,"b":[1,2],"c":{"d":"e"}}"#;
        assert_eq!(
            read(json, &["/x", "/a/b", "/b/2", "/b/01", "/b/-", "/c/d/e"]),
            [None, None, None, None, None, None]
        );
    }

    #[test]
    fn escaped_tokens_and_keys_match() {
        let json = r#"{"a/b":{"m~n":"1"},"k\u0065y":"2"}"#;
        assert_eq!(
            read(json, &["/a~1b/m~0n", "/key"]),
            [Some("1".to_owned()), Some("2".to_owned())]
        );
    }

    #[test]
    fn a_pointer_that_is_a_prefix_of_another_reads_both() {
        let json = r#"{"a":{"b":"c"},"x":"y"}"#;
        assert_eq!(
            read(json, &["/a", "/a/b", "/x"]),
            [None, Some("c".to_owned()), Some("y".to_owned())]
        );
    }

    #[test]
    fn a_repeated_key_on_a_path_is_refused_and_elsewhere_ignored() {
        assert_eq!(
            read_fields(r#"{"id":"1","id":"2"}"#, &["/id"]),
            Err(PointerError::DuplicateKey)
        );
        assert_eq!(
            read_fields(r#"{"a":{"x":1},"a":{"id":"2"}}"#, &["/a/id"]),
            Err(PointerError::DuplicateKey)
        );
        assert_eq!(
            read(r#"{"other":1,"other":2,"id":"3"}"#, &["/id"]),
            [Some("3".to_owned())]
        );
    }

    #[test]
    fn text_that_is_not_json_is_refused() {
        for text in ["{", r#"{"a":1} x"#, "", r#"{"a":tru}"#] {
            assert_eq!(
                read_fields(text, &["/a"]),
                Err(PointerError::Syntax),
                "{text}"
            );
        }
    }
}
