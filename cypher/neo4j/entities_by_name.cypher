// $names are already normalised (talent_core.text.normalise_name), like e.name_lc.
UNWIND $names AS name_lc
MATCH (e:Entity {name_lc: name_lc})
RETURN name_lc, e.id AS id, e.name AS name
