"""Stock history in the database: reads, writes, views, days and estimates."""
