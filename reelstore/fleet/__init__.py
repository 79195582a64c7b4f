"""A fleet of drainers on one shared Postgres store: leased claims on the outbox, fenced writes, takeover."""
