//! The review queue: failed and quarantined receipts, and effects in review or failed,
//! grouped by reason, oldest first, with their owners.

use super::*;

#[derive(Debug)]
pub struct ReviewRow {
    pub subject: String,
    pub owner: String,
    pub status: String,
    pub reason: String,
    pub count: i64,
    pub oldest_link: String,
    pub oldest_id: String,
    pub oldest_at: String,
    pub list_link: String,
}

#[derive(Template)]
#[template(path = "console/review.html")]
pub struct Review {
    pub frame: Frame,
    pub receipts: Vec<ReviewRow>,
    pub effects: Vec<ReviewRow>,
}

pub(super) async fn review(console: &Console, context: &Context) -> Page {
    let (receipt_groups, effect_groups) = console
        .db(async |connection| {
            Ok((
                admin::receipt_review_groups(&mut *connection, REVIEW_GROUPS).await?,
                admin::effect_review_groups(&mut *connection, REVIEW_GROUPS).await?,
            ))
        })
        .await?;
    let config = console.config();
    let link = |path: &str, pairs: &[(&str, &str)]| {
        let mut serializer = form_urlencoded::Serializer::new(String::new());
        for (name, value) in pairs {
            serializer.append_pair(name, value);
        }
        format!("{path}?{}", serializer.finish())
    };
    Ok(respond::page(
        StatusCode::OK,
        &Review {
            frame: context.frame("Review queue"),
            receipts: receipt_groups
                .iter()
                .map(|group| ReviewRow {
                    subject: view::text(&group.integration),
                    owner: view::text(&integration_owner(config, &group.integration)),
                    status: group.status.to_string(),
                    reason: view::text(&group.reason),
                    count: group.count,
                    oldest_link: format!("/receipts/{}", group.oldest_id),
                    oldest_id: group.oldest_id.to_string(),
                    oldest_at: view::time(group.oldest_at),
                    list_link: link(
                        "/receipts",
                        &[
                            ("status", group.status.as_str()),
                            ("integration", &group.integration),
                        ],
                    ),
                })
                .collect(),
            effects: effect_groups
                .iter()
                .map(|group| ReviewRow {
                    subject: view::text(&group.sink),
                    owner: view::text(&sink_owner(config, &group.sink)),
                    status: group.status.to_string(),
                    reason: view::text(&group.reason),
                    count: group.count,
                    oldest_link: format!("/effects/{}", group.oldest_id),
                    oldest_id: group.oldest_id.to_string(),
                    oldest_at: view::time(group.oldest_at),
                    list_link: link(
                        "/effects",
                        &[("status", group.status.as_str()), ("sink", &group.sink)],
                    ),
                })
                .collect(),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_of_a_closed_status_reads_a_window_and_continues_below_it() {
        // The highest id is 1,000,000: the page reads ids above 800,001.
        assert_eq!(window_floor(Some(1_000_000)), Some(1_000_001 - WINDOW_IDS));
        // Near the first id there is none.
        assert_eq!(window_floor(Some(149_999)), None);
        assert_eq!(window_floor(None), None);
        // Never below the highest id's day: five ids into a day, the window is those
        // five, and the next one starts at the previous day's last id.
        let day = 20_427 * IDS_PER_DAY;
        assert_eq!(window_floor(Some(day + 5)), Some(day - 1));
        assert_eq!(
            window_floor(Some(day + 1_000_000)),
            Some(day + 1_000_001 - WINDOW_IDS)
        );
        let query = Query::parse("status=done&type=never.sent&before=500000").expect("no NUL");
        // A full page continues below its last row.
        let (next, searched) = continuation(&query, Some(499_950), Some(300_000), Some(500_000));
        assert_eq!(
            next.as_deref(),
            Some("status=done&type=never.sent&before=499950")
        );
        assert!(searched.is_empty());
        // A page that ran out at the floor continues below the floor, saying what it read.
        let (next, searched) = continuation(&query, None, Some(300_000), Some(500_000));
        assert_eq!(
            next.as_deref(),
            Some("status=done&type=never.sent&before=300001")
        );
        assert_eq!(
            searched,
            "Searched ids 300001 to 499999: a page reads at most 200000 ids of a closed status."
        );
        assert_eq!(
            continuation(&query, None, None, None),
            (None, String::new())
        );
    }
}
