// The relation texts the triples use (one scan): catalogue entries outside it are unused.
MATCH ()-[t:REL]->()
RETURN DISTINCT t.rel AS rel
