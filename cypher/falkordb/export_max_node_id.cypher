// Export: the largest internal node id (the end of the id ranges the export pages over).
MATCH (n)
RETURN max(ID(n)) AS top
