//! URLs of databases on a test server.

/// Replaces the database name in a `scheme://user@host:port/database?params` URL, keeping
/// the rest (`postgres://`, `mysql://`).
///
/// ```
/// use jobs_driver::test_server::replace_database;
///
/// assert_eq!(replace_database("mysql://root@127.0.0.1:3306/mysql", "t1"), "mysql://root@127.0.0.1:3306/t1");
/// assert_eq!(
///     replace_database("postgresql://postgres@localhost/postgres?host=/tmp/pg", "t2"),
///     "postgresql://postgres@localhost/t2?host=/tmp/pg"
/// );
/// assert_eq!(replace_database("postgres://db.internal", "t3"), "postgres://db.internal/t3");
/// ```
pub fn replace_database(url: &str, database: &str) -> String {
    let (head, query) = match url.split_once('?') {
        Some((head, query)) => (head, Some(query)),
        None => (url, None),
    };
    let authority_start = head.find("://").map(|i| i + 3).unwrap_or(0);
    let base = match head[authority_start..].find('/') {
        Some(slash) => &head[..authority_start + slash],
        None => head,
    };
    match query {
        Some(query) => format!("{base}/{database}?{query}"),
        None => format!("{base}/{database}"),
    }
}

#[cfg(test)]
mod tests {
    use super::replace_database;

    #[test]
    fn replaces_the_database_and_keeps_credentials_port_and_parameters() {
        assert_eq!(
            replace_database("postgresql://u:p@h:5/db?sslmode=disable", "x"),
            "postgresql://u:p@h:5/x?sslmode=disable"
        );
        assert_eq!(replace_database("mysql://root@127.0.0.1:3306", "x"), "mysql://root@127.0.0.1:3306/x");
    }
}
