// Run in an auto-commit transaction (session.run): deletes in batches of 10k.
MATCH (n)
WHERE n:Entity OR n:Relation OR n:Source
CALL (n) {
  DETACH DELETE n
} IN TRANSACTIONS OF 10000 ROWS
