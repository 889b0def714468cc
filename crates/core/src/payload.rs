//! The storability contract: which JSON bodies the ingress may acknowledge, because
//! PostgreSQL's `jsonb` stores them and the worker's decoder reads them back — and that
//! decoder, so that both sides apply one rule.
//!
//! A body is storable when it is UTF-8 text holding one JSON object (RFC 8259), nested at
//! most [`MAX_JSON_DEPTH`] deep, in which
//! - no string (keys included) holds U+0000 (`jsonb` cannot) or an unpaired UTF-16
//!   surrogate escape such as `"\ud83d"` (neither `jsonb` nor the decoder can);
//! - every number is within the range of a double (|x| ≤ 1.8e308; the worker reads
//!   numbers as serde_json does), and fits PostgreSQL's `numeric`: at most
//!   [`MAX_FRACTION_DIGITS`] digits after the decimal point once the exponent is applied,
//!   and an exponent of magnitude below [`EXPONENT_LIMIT`];
//! - its numbers, written out in full as PostgreSQL stores them, are at most
//!   [`MAX_NUMBER_GROWTH_BYTES`] longer in all than written: a stored payload then renders
//!   to at most twice its body plus that, never to megabytes from a few kilobytes.
//!
//! The escaped text `"\\u0000"` (a backslash, then `u0000`) is an ordinary string and is
//! storable. Everything else is refused before the commit with a reason that names what
//! is wrong, never the offending content.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};

/// The deepest nesting of arrays and objects we store. Real provider payloads stay far
/// below it; deeper bodies would only stress parsers (ours and PostgreSQL's).
pub const MAX_JSON_DEPTH: usize = 64;

/// `numeric` keeps at most this many digits after the decimal point (`NUMERIC_DSCALE_MAX`).
pub const MAX_FRACTION_DIGITS: i64 = 16_383;

/// `numeric` refuses exponents of this magnitude or more (`INT_MAX / 2`).
pub const EXPONENT_LIMIT: i64 = 1_073_741_823;

/// How many bytes longer than written a body's numbers may become when PostgreSQL writes
/// them out in full (`1e300` is stored as 301 digits). With jsonb's added spaces (at most
/// one per byte), a stored payload renders to at most twice its body plus this — so that
/// a small body cannot become a huge one for the worker to read.
pub const MAX_NUMBER_GROWTH_BYTES: usize = 64 * 1024;

/// Why a body cannot be stored and read back. Each message names the problem, never the
/// content, so it is safe in a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unstorable {
    /// The bytes are not UTF-8.
    #[error("body is not UTF-8")]
    NotUtf8,
    /// Valid or not, the text does not start with `{`.
    #[error("body is not a JSON object")]
    NotAnObject,
    /// More than [`MAX_JSON_DEPTH`] levels of arrays and objects.
    #[error("body is nested too deeply")]
    TooDeep,
    /// Not JSON at all.
    #[error("body is not valid JSON")]
    Syntax,
    /// A string escapes U+0000, which `jsonb` cannot hold.
    #[error("a string holds U+0000 (\\u0000), which cannot be stored")]
    NulCharacter,
    /// A `\uD800`–`\uDFFF` escape without its partner.
    #[error("a string holds an unpaired UTF-16 surrogate escape")]
    LoneSurrogate,
    /// A number beyond the range of a double.
    #[error("a number is beyond the range of a double")]
    NumberOutOfRange,
    /// A number with more digits after the decimal point than `numeric` keeps.
    #[error("a number has more than 16383 digits after the decimal point")]
    NumberTooPrecise,
    /// A number whose exponent `numeric` refuses.
    #[error("a number has an exponent beyond what can be stored")]
    ExponentTooLarge,
    /// Numbers that written out in full (as they are stored) would be far longer than
    /// written (`1e-16383` is 16,385 bytes once stored).
    #[error("numbers in the body would be stored as more than 64 KiB of extra digits")]
    NumbersTooLong,
}

/// Checks `body` against the storability contract and returns it as text.
pub fn check_storable(body: &[u8]) -> Result<&str, Unstorable> {
    let text = std::str::from_utf8(body).map_err(|_| Unstorable::NotUtf8)?;
    if text.trim_start().as_bytes().first() != Some(&b'{') {
        return Err(Unstorable::NotAnObject);
    }
    scan_lexically(text.as_bytes())?;
    let mut deserializer = serde_json::Deserializer::from_str(text);
    Storable::deserialize(&mut deserializer)
        .and_then(|_| deserializer.end())
        .map_err(|error| classify(&error))?;
    Ok(text)
}

/// Reads a stored payload the way every handler sees it. The worker calls this once per
/// receipt, so a payload that somehow fails (stored before this contract) costs only its
/// own receipt.
pub fn decode(text: &str) -> Result<serde_json::Value, serde_json::Error> {
    serde_json::from_str(text)
}

/// The message [`Storable`] gives serde for a string holding U+0000.
const NUL_MESSAGE: &str = "string holds U+0000";

/// Which contract rule a serde_json error broke. serde_json has no finer category than
/// syntax/data, so its (stable) messages tell surrogates and ranges apart.
fn classify(error: &serde_json::Error) -> Unstorable {
    let message = error.to_string();
    if message.starts_with(NUL_MESSAGE) {
        Unstorable::NulCharacter
    } else if message.contains("surrogate") || message.starts_with("unexpected end of hex escape") {
        Unstorable::LoneSurrogate
    } else if message.starts_with("number out of range") {
        Unstorable::NumberOutOfRange
    } else {
        Unstorable::Syntax
    }
}

/// One pass outside strings: nesting depth, each number's digits after the decimal point
/// and exponent as `numeric` will count them, and how much longer the numbers will be
/// once PostgreSQL writes them out in full. Never fails on text that is not JSON (serde
/// refuses that next); arithmetic saturates.
fn scan_lexically(bytes: &[u8]) -> Result<(), Unstorable> {
    let (mut depth, mut in_string) = (0usize, false);
    let (mut index, mut number_growth) = (0, 0usize);
    while index < bytes.len() {
        if in_string {
            // Most of a payload is inside strings: jump to the next quote or backslash
            // (a vectorised search) instead of looking at every byte. Neither byte occurs
            // inside a multi-byte UTF-8 sequence.
            match memchr::memchr2(b'"', b'\\', &bytes[index..]) {
                // A backslash: the byte it escapes cannot end the string.
                Some(offset) if bytes[index + offset] == b'\\' => index += offset + 2,
                Some(offset) => {
                    in_string = false;
                    index += offset + 1;
                }
                // Unterminated: serde refuses it next.
                None => break,
            }
            continue;
        }
        let byte = bytes[index];
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_JSON_DEPTH {
                    return Err(Unstorable::TooDeep);
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'-' | b'0'..=b'9' => {
                let growth;
                (index, growth) = check_number(bytes, index)?;
                number_growth = number_growth.saturating_add(growth);
                if number_growth > MAX_NUMBER_GROWTH_BYTES {
                    return Err(Unstorable::NumbersTooLong);
                }
                continue;
            }
            _ => {}
        }
        index += 1;
    }
    Ok(())
}

/// Checks the number starting at `start` against `numeric`'s limits; returns the index
/// after it and how many bytes longer PostgreSQL will render it than it is written
/// (`1e300` is stored as 301 digits, `1e-300` as `0.` and 300 more).
fn check_number(bytes: &[u8], start: usize) -> Result<(usize, usize), Unstorable> {
    let digits_from = |mut index: usize| {
        let from = index;
        while bytes.get(index).is_some_and(u8::is_ascii_digit) {
            index += 1;
        }
        (index, from)
    };
    let negative = bytes[start] == b'-';
    let (integer_end, integer_start) = digits_from(start + usize::from(negative));
    let (mut index, mut fraction_start) = (integer_end, integer_end);
    if bytes.get(index) == Some(&b'.') {
        (index, fraction_start) = digits_from(index + 1);
    }
    let fraction_end = index;
    let mut exponent: i64 = 0;
    if matches!(bytes.get(index), Some(b'e' | b'E')) {
        index += 1;
        let negative_exponent = match bytes.get(index) {
            Some(b'-') => {
                index += 1;
                true
            }
            Some(b'+') => {
                index += 1;
                false
            }
            _ => false,
        };
        let (end, from) = digits_from(index);
        for &digit in &bytes[from..end] {
            exponent = exponent
                .saturating_mul(10)
                .saturating_add(i64::from(digit - b'0'));
        }
        if negative_exponent {
            exponent = -exponent;
        }
        index = end;
    }
    if exponent.abs() >= EXPONENT_LIMIT {
        return Err(Unstorable::ExponentTooLarge);
    }
    let count = |from: usize, to: usize| i64::try_from(to.saturating_sub(from)).unwrap_or(i64::MAX);
    let integer_digits = count(integer_start, integer_end);
    let fraction_digits = count(fraction_start, fraction_end);
    // numeric keeps every written fraction digit: its display scale.
    let scale = fraction_digits.saturating_sub(exponent).max(0);
    if scale > MAX_FRACTION_DIGITS {
        return Err(Unstorable::NumberTooPrecise);
    }
    // The rendered integer part: the significant digits left of the shifted point.
    let mantissa = bytes[integer_start..integer_end]
        .iter()
        .chain(&bytes[fraction_start..fraction_end]);
    let leading_zeros = count(
        0,
        mantissa.clone().take_while(|&&digit| digit == b'0').count(),
    );
    let is_zero = leading_zeros == integer_digits.saturating_add(fraction_digits);
    let integer_length = if is_zero {
        1
    } else {
        integer_digits
            .saturating_add(exponent)
            .saturating_sub(leading_zeros)
            .max(1)
    };
    let rendered = i64::from(negative && !is_zero)
        .saturating_add(integer_length)
        .saturating_add(if scale > 0 { scale + 1 } else { 0 });
    let written = count(start, index.max(start + 1));
    let growth = usize::try_from(rendered.saturating_sub(written).max(0)).unwrap_or(usize::MAX);
    Ok((index.max(start + 1), growth))
}

/// Deserializes any JSON value without keeping it: serde_json decodes every string (keys
/// too, which checks surrogate escapes) and every number (which checks the double range),
/// exactly as it does when the worker builds a `serde_json::Value`.
struct Storable;

impl<'de> Deserialize<'de> for Storable {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StorableVisitor)
    }
}

struct StorableVisitor;

impl<'de> Visitor<'de> for StorableVisitor {
    type Value = Storable;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Storable, E> {
        Ok(Storable)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Storable, E> {
        Ok(Storable)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Storable, E> {
        Ok(Storable)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Storable, E> {
        Ok(Storable)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Storable, E> {
        if text.contains('\0') {
            return Err(E::custom(NUL_MESSAGE));
        }
        Ok(Storable)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Storable, E> {
        Ok(Storable)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Storable, A::Error> {
        while seq.next_element::<Storable>()?.is_some() {}
        Ok(Storable)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Storable, A::Error> {
        while map.next_entry::<Storable, Storable>()?.is_some() {}
        Ok(Storable)
    }
}

#[cfg(test)]
mod tests;
