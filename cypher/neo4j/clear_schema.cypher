DROP CONSTRAINT entity_id IF EXISTS;
DROP CONSTRAINT relation_name IF EXISTS;
DROP CONSTRAINT source_id IF EXISTS;
DROP INDEX entity_name_lc IF EXISTS;
DROP INDEX entity_name_fulltext IF EXISTS;
DROP INDEX entity_embedding IF EXISTS;
DROP INDEX relation_embedding IF EXISTS;
