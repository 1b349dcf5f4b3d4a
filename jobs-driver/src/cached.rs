//! A raw-SQL query that the database prepares once per connection, on any diesel backend.
//!
//! diesel never caches `sql_query` statements, so each run would parse and plan its SQL
//! again (a round trip on Postgres, a `sqlite3_prepare` of ~10 µs on SQLite). A driver's
//! hot statements (claim, complete, insert) are fixed text with numbered parameters, safe
//! to prepare once: [`CachedQuery`] writes the text with diesel's own bind placeholders in
//! place of `$n` (`$1` on Postgres, `?` on SQLite), which keeps diesel's statement cache on.
//!
//! ```
//! use diesel::sql_types::{BigInt, Text};
//! use jobs_driver::cached::CachedQuery;
//!
//! // `$1` may appear more than once; each occurrence is bound to the same value.
//! let query = CachedQuery::<diesel::pg::Pg>::new("SELECT $1 AS n, $2 AS s, $1 + 1 AS m")
//!     .bind::<BigInt, _>(7)
//!     .bind::<Text, _>("x");
//! let sql = diesel::debug_query(&query).to_string();
//! assert!(sql.starts_with("SELECT $1 AS n, $2 AS s, $3 + 1 AS m"), "{sql}");
//! ```

use diesel::backend::Backend;
use diesel::expression::AsExpression;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::result::Error as DieselError;
use diesel::sql_types::Untyped;

type Bind<'a, DB> = Box<dyn QueryFragment<DB> + Send + 'a>;

/// Fixed SQL with `$1`, `$2`, ... parameters (each may appear several times) for backend
/// `DB`, returning rows of SQL type `ST`: `Untyped` (decoded by column name,
/// `QueryableByName`) unless [`returning`](Self::returning) names the columns' types
/// (decoded by position, `Queryable`: no name lookups per field).
pub struct CachedQuery<'a, DB: Backend, ST = Untyped> {
    pieces: Vec<Piece<'a>>,
    binds: Vec<Bind<'a, DB>>,
    row: std::marker::PhantomData<fn() -> ST>,
}

/// A run of the text, or a parameter by its number (`$1` is 1; 0 stands for a number
/// too large to be one).
enum Piece<'a> {
    Text(&'a str),
    Param(usize),
}

/// `sql` cut at its `$n` parameters, once per query: diesel walks a query several times
/// per run (its cache key, its binds, whether it may be cached).
fn pieces(sql: &str) -> Vec<Piece<'_>> {
    let (mut pieces, mut start, mut next) = (Vec::new(), 0, 0);
    while let Some(found) = sql[next..].find('$') {
        let at = next + found;
        let digits = sql[at + 1..].bytes().take_while(u8::is_ascii_digit).count();
        next = at + 1 + digits;
        if digits == 0 {
            continue;
        }
        if at > start {
            pieces.push(Piece::Text(&sql[start..at]));
        }
        pieces.push(Piece::Param(sql[at + 1..next].parse().unwrap_or(0)));
        start = next;
    }
    if start < sql.len() {
        pieces.push(Piece::Text(&sql[start..]));
    }
    pieces
}

impl<'a, DB: Backend> CachedQuery<'a, DB> {
    /// The query `sql`, to be given its parameters in order with [`bind`](Self::bind).
    /// Its text is the statement cache's key: a text built at run time is prepared once
    /// per connection for each distinct text, so build it from a bounded set of shapes.
    pub fn new(sql: &'a str) -> Self {
        CachedQuery { pieces: pieces(sql), binds: Vec::new(), row: std::marker::PhantomData }
    }

    /// Declares the SQL types of the returned columns, in order.
    pub fn returning<ST>(self) -> CachedQuery<'a, DB, ST> {
        CachedQuery { pieces: self.pieces, binds: self.binds, row: std::marker::PhantomData }
    }
}

impl<'a, DB: Backend, Row> CachedQuery<'a, DB, Row> {
    /// Binds the next parameter as SQL type `ST`.
    pub fn bind<ST, T>(mut self, value: T) -> Self
    where
        T: AsExpression<ST>,
        T::Expression: QueryFragment<DB> + Send + 'a,
        ST: diesel::sql_types::SqlType + diesel::expression::TypedExpressionType,
    {
        self.binds.push(Box::new(value.as_expression()));
        self
    }
}

impl<DB: Backend, ST> QueryFragment<DB> for CachedQuery<'_, DB, ST> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, DB>) -> diesel::QueryResult<()> {
        for piece in &self.pieces {
            match *piece {
                Piece::Text(text) => out.push_sql(text),
                Piece::Param(n) => {
                    let bind = n.checked_sub(1).and_then(|i| self.binds.get(i)).ok_or_else(|| {
                        let error = match n {
                            0 => "a parameter number is out of range".to_owned(),
                            n => format!("parameter ${n} was not bound"),
                        };
                        DieselError::QueryBuilderError(error.into())
                    })?;
                    bind.walk_ast(out.reborrow())?;
                }
            }
        }
        Ok(())
    }
}

impl<DB: Backend, ST> QueryId for CachedQuery<'_, DB, ST> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<DB: Backend, ST> Query for CachedQuery<'_, DB, ST> {
    type SqlType = ST;
}

impl<DB: Backend, Conn, ST> diesel::RunQueryDsl<Conn> for CachedQuery<'_, DB, ST> {}

#[cfg(test)]
mod tests {
    use diesel::sql_types::{BigInt, Text};

    use super::CachedQuery;

    fn sql(query: &CachedQuery<'_, diesel::pg::Pg>) -> String {
        diesel::debug_query(query).to_string()
    }

    #[test]
    fn parameters_become_placeholders_and_every_other_dollar_stays() {
        let query = CachedQuery::<diesel::pg::Pg>::new("SELECT '$', $2, $10 || 'x$' FROM t WHERE a = $1 $")
            .bind::<BigInt, _>(1)
            .bind::<Text, _>("b");
        let query = (3..=10).fold(query, |q, n| q.bind::<BigInt, _>(n));
        let text = sql(&query);
        assert!(text.starts_with("SELECT '$', $1, $2 || 'x$' FROM t WHERE a = $3 $ --"), "{text}");
    }

    #[test]
    fn an_unbound_or_impossible_parameter_is_an_error() {
        use diesel::query_builder::QueryFragment;
        for text in ["SELECT $2", "SELECT $99999999999999999999999"] {
            let query = CachedQuery::<diesel::pg::Pg>::new(text).bind::<BigInt, _>(1);
            let mut out = diesel::pg::PgQueryBuilder::default();
            assert!(query.to_sql(&mut out, &diesel::pg::Pg).is_err(), "{text}");
        }
    }
}
