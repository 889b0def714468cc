//! CPU time of a process, from `/proc`: what the benchmark programs report per request.

/// Clock ticks per second in `/proc` (`USER_HZ`): 100 on every Linux ABI these programs
/// run on.
pub const TICKS_PER_SECOND: u64 = 100;

/// utime + stime of one process (all its threads, the exited ones too), from its
/// `/proc/…/stat`.
pub fn process_ticks(path: &str) -> Option<u64> {
    process_ticks_in(&std::fs::read_to_string(path).ok()?)
}

/// utime + stime from the text of a `/proc/…/stat` (fields 14 and 15; the command name in
/// field 2 may hold spaces and parentheses, so fields are counted after its last `)`).
fn process_ticks_in(stat: &str) -> Option<u64> {
    let (_, after_name) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let user: u64 = fields.get(11)?.parse().ok()?;
    let system: u64 = fields.get(12)?.parse().ok()?;
    Some(user + system)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_ticks_count_fields_after_a_command_name_with_spaces_and_parentheses() {
        let stat = "4242 (tokio (rt) 1) S 1 4242 4242 0 -1 4194560 100 0 0 0 \
                    37 5 0 0 20 0 3 0 500 1000 200 18446744073709551615";
        assert_eq!(process_ticks_in(stat), Some(42));
        assert_eq!(process_ticks_in("4242 (truncated"), None);
    }
}
