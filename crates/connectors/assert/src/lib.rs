//! Assert sink: checks rows against SeaTunnel's row and field rules
