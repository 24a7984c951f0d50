// (kind, label, status) of every index and constraint; the store waits for OPERATIONAL.
CALL db.indexes() YIELD label, status
RETURN 'index' AS kind, label, status
UNION ALL
CALL db.constraints() YIELD label, status
RETURN 'constraint' AS kind, label, status
