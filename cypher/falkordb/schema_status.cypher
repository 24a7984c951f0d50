// (label, status) of every index; the store waits until all are OPERATIONAL.
CALL db.indexes() YIELD label, status
RETURN label, status
