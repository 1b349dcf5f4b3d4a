//! A raw-SQL query that Postgres prepares once per connection.
//!
//! diesel never caches `sql_query` statements, so each run would parse and plan its SQL
//! again, costing a round trip. The hot statements (claim, complete, insert) are fixed
//! text with numbered parameters, safe to prepare once: [`CachedQuery`] writes the text with
//! diesel's own bind placeholders in place of `$n`, which keeps diesel's statement cache on.

use diesel::expression::AsExpression;
use diesel::pg::Pg;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::result::Error as DieselError;
use diesel::sql_types::Untyped;

type Bind<'a> = Box<dyn QueryFragment<Pg> + Send + 'a>;

/// Fixed SQL with `$1`, `$2`, ... parameters (each may appear several times), returning
/// rows of SQL type `ST`: `Untyped` (decoded by column name, `QueryableByName`) unless
/// [`returning`](Self::returning) names the columns' types (decoded by position,
/// `Queryable`: no name lookups per field).
pub(crate) struct CachedQuery<'a, ST = Untyped> {
    sql: &'static str,
    binds: Vec<Bind<'a>>,
    row: std::marker::PhantomData<fn() -> ST>,
}

impl<'a> CachedQuery<'a> {
    /// The query `sql`, to be given its parameters in order with [`bind`](Self::bind).
    pub(crate) fn new(sql: &'static str) -> Self {
        CachedQuery { sql, binds: Vec::new(), row: std::marker::PhantomData }
    }

    /// Declares the SQL types of the returned columns, in order.
    pub(crate) fn returning<ST>(self) -> CachedQuery<'a, ST> {
        CachedQuery { sql: self.sql, binds: self.binds, row: std::marker::PhantomData }
    }
}

impl<'a, Row> CachedQuery<'a, Row> {
    /// Binds the next parameter as SQL type `ST`.
    pub(crate) fn bind<ST, T>(mut self, value: T) -> Self
    where
        T: AsExpression<ST>,
        T::Expression: QueryFragment<Pg> + Send + 'a,
        ST: diesel::sql_types::SqlType + diesel::expression::TypedExpressionType,
    {
        self.binds.push(Box::new(value.as_expression()));
        self
    }
}

impl<ST> QueryFragment<Pg> for CachedQuery<'_, ST> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> diesel::QueryResult<()> {
        let mut rest = self.sql;
        while let Some(pos) = rest.find('$') {
            let digits = rest[pos + 1..].bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                out.push_sql(&rest[..=pos]);
                rest = &rest[pos + 1..];
                continue;
            }
            out.push_sql(&rest[..pos]);
            let n: usize = rest[pos + 1..pos + 1 + digits]
                .parse()
                .map_err(|_| DieselError::QueryBuilderError("bad parameter number".into()))?;
            let bind = n.checked_sub(1).and_then(|i| self.binds.get(i)).ok_or_else(|| {
                DieselError::QueryBuilderError(format!("parameter ${n} was not bound").into())
            })?;
            bind.walk_ast(out.reborrow())?;
            rest = &rest[pos + 1 + digits..];
        }
        out.push_sql(rest);
        Ok(())
    }
}

impl<ST> QueryId for CachedQuery<'_, ST> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<ST> Query for CachedQuery<'_, ST> {
    type SqlType = ST;
}

impl<Conn, ST> diesel::RunQueryDsl<Conn> for CachedQuery<'_, ST> {}
