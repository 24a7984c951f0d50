// Block until every index is ONLINE (fails after $timeout seconds).
CALL db.awaitIndexes($timeout)
