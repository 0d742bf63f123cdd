"""Writes the grammar corpus, tests/data/schemas/*.json (run from the repository root).

Fifty-odd schemas of the kind structured-output requests send (records of users, orders,
events, tool arguments, extraction results...), each written here by hand, then three
variants of each that stress other paths of the converter:
  strict   every property required and additionalProperties false (OpenAI's strict mode)
  listed   the schema in $defs, reached by $ref, as the items of a bounded array
  nullable anyOf [the schema, null]
plus a few that stand alone (recursion, oneOf with a discriminator, any object).
"""
import copy
import json
import pathlib

S = {"type": "string"}
I = {"type": "integer"}
N = {"type": "number"}
B = {"type": "boolean"}


def P(pattern, **kw):
    d = {"type": "string", "pattern": pattern}
    d.update(kw)
    return d


def obj(props, required=(), **kw):
    d = {"type": "object", "properties": props}
    if required:
        d["required"] = list(required)
    d.update(kw)
    return d


def arr(items, **kw):
    d = {"type": "array", "items": items}
    d.update(kw)
    return d


ADDRESS = obj({"street": S, "city": S, "postal_code": {"type": "string", "maxLength": 10},
               "country": {"type": "string", "minLength": 2, "maxLength": 2}}, ["street", "city"])
GEO = obj({"lat": {"type": "number", "minimum": -90, "maximum": 90},
           "lon": {"type": "number", "minimum": -180, "maximum": 180}}, ["lat", "lon"], additionalProperties=False)

BASE = {
    "user": obj({"id": I, "name": S, "email": {"type": "string", "format": "email"}, "active": B}, ["id", "name"]),
    "address": ADDRESS,
    "geo_point": GEO,
    "product": obj({"sku": {"type": "string", "minLength": 4, "maxLength": 12}, "title": S,
                    "price": {"type": "number", "minimum": 0}, "currency": {"enum": ["USD", "EUR", "GBP", "JPY"]},
                    "in_stock": B, "tags": arr(S, maxItems=5)}, ["sku", "title", "price"]),
    "order": obj({"order_id": {"type": "string", "format": "uuid"}, "created": {"type": "string", "format": "date-time"},
                  "lines": arr(obj({"sku": S, "qty": {"type": "integer", "minimum": 1, "maximum": 99}}, ["sku", "qty"]),
                               minItems=1, maxItems=4),
                  "status": {"enum": ["pending", "paid", "shipped", "cancelled"]}}, ["order_id", "lines", "status"]),
    "event": obj({"name": S, "date": {"type": "string", "format": "date"}, "start": {"type": "string", "format": "time"},
                  "venue": ADDRESS, "capacity": {"type": "integer", "minimum": 0}}, ["name", "date"]),
    "weather": obj({"city": S, "temperature_c": {"type": "number", "minimum": -100, "maximum": 60},
                    "condition": {"enum": ["sunny", "cloudy", "rain", "snow", "fog"]},
                    "humidity": {"type": "integer", "minimum": 0, "maximum": 100}}, ["city", "temperature_c"]),
    "invoice": obj({"number": S, "issued": {"type": "string", "format": "date"}, "total": N,
                    "paid": B, "items": arr(obj({"description": S, "amount": N}, ["description", "amount"]), maxItems=3)},
                   ["number", "total"]),
    "log_entry": obj({"ts": {"type": "string", "format": "date-time"}, "level": {"enum": ["debug", "info", "warn", "error"]},
                      "message": {"type": "string", "maxLength": 200}, "host": {"type": "string", "format": "ipv4"}},
                     ["ts", "level", "message"]),
    "get_weather_args": obj({"location": S, "unit": {"enum": ["celsius", "fahrenheit"]}}, ["location"],
                            additionalProperties=False),
    "search_args": obj({"query": {"type": "string", "minLength": 1}, "limit": {"type": "integer", "minimum": 1,
                        "maximum": 50}, "filters": arr(S, maxItems=3)}, ["query"]),
    "send_email_args": obj({"to": arr({"type": "string", "format": "email"}, minItems=1, maxItems=3), "subject": S,
                            "body": S, "cc": arr({"type": "string", "format": "email"}, maxItems=2)},
                           ["to", "subject", "body"]),
    "recipe": obj({"title": S, "servings": {"type": "integer", "minimum": 1, "maximum": 12},
                   "ingredients": arr(obj({"name": S, "quantity": N, "unit": S}, ["name"]), minItems=1, maxItems=5),
                   "steps": arr(S, minItems=1, maxItems=4)}, ["title", "ingredients"]),
    "movie": obj({"title": S, "year": {"type": "integer", "minimum": 1888, "maximum": 2030},
                  "genres": arr({"enum": ["drama", "comedy", "action", "horror", "documentary"]}, maxItems=3),
                  "rating": {"type": "number", "minimum": 0, "maximum": 10}}, ["title", "year"]),
    "book": obj({"isbn": {"type": "string", "minLength": 10, "maxLength": 13}, "title": S,
                 "authors": arr(S, minItems=1, maxItems=3), "pages": {"type": "integer", "exclusiveMinimum": 0}},
                ["isbn", "title"]),
    "issue": obj({"number": I, "title": S, "state": {"enum": ["open", "closed"]},
                  "labels": arr(obj({"name": S, "color": {"type": "string", "minLength": 6, "maxLength": 6}}, ["name"]),
                                maxItems=3),
                  "assignee": {"anyOf": [S, {"type": "null"}]}}, ["number", "title", "state"]),
    "sensor_reading": obj({"sensor_id": S, "value": N, "unit": {"const": "kPa"}, "ok": B,
                           "taken_at": {"type": "string", "format": "date-time"}}, ["sensor_id", "value", "unit"]),
    "sentiment": obj({"label": {"enum": ["positive", "negative", "neutral"]},
                      "score": {"type": "number", "minimum": 0, "maximum": 1}}, ["label", "score"],
                     additionalProperties=False),
    "entities": obj({"people": arr(S, maxItems=4), "places": arr(S, maxItems=4),
                     "organizations": arr(S, maxItems=4)}, ["people", "places", "organizations"]),
    "classification": obj({"category": {"enum": ["billing", "technical", "account", "other"]},
                           "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                           "reasons": arr({"type": "string", "maxLength": 80}, maxItems=3)}, ["category"]),
    "summary": obj({"title": {"type": "string", "maxLength": 60}, "bullets": arr(S, minItems=2, maxItems=4),
                    "word_count": {"type": "integer", "minimum": 0}}, ["title", "bullets"]),
    "qa_pair": obj({"question": S, "answer": S, "sources": arr({"type": "string", "maxLength": 40}, maxItems=2)},
                   ["question", "answer"]),
    "calendar_slot": obj({"day": {"enum": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]},
                          "from": {"type": "string", "format": "time"}, "to": {"type": "string", "format": "time"}},
                         ["day", "from", "to"]),
    "payment": obj({"amount_cents": {"type": "integer", "minimum": 1, "maximum": 1000000},
                    "method": {"enum": ["card", "bank_transfer", "wallet"]}, "reference": {"type": "string", "format": "uuid"},
                    "metadata": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 20}}},
                   ["amount_cents", "method"]),
    "config_flags": {"type": "object", "additionalProperties": B},
    "http_request": obj({"method": {"enum": ["GET", "POST", "PUT", "DELETE"]}, "path": S,
                         "headers": {"type": "object", "additionalProperties": S},
                         "body": {"anyOf": [S, {"type": "null"}]}}, ["method", "path"]),
    "employee": obj({"id": {"type": "integer", "minimum": 1}, "name": S, "manager_id": {"type": ["integer", "null"]},
                     "department": {"enum": ["eng", "sales", "ops", "hr"]}, "skills": arr(S, maxItems=4),
                     "home": ADDRESS}, ["id", "name", "department"]),
    "flight": obj({"flight_no": {"type": "string", "minLength": 3, "maxLength": 7}, "from": {"type": "string",
                   "minLength": 3, "maxLength": 3}, "to": {"type": "string", "minLength": 3, "maxLength": 3},
                   "departure": {"type": "string", "format": "date-time"}, "seats_left": {"type": "integer",
                   "minimum": 0, "maximum": 500}}, ["flight_no", "from", "to"]),
    "chess_move": obj({"from": {"type": "string", "minLength": 2, "maxLength": 2}, "to": {"type": "string",
                       "minLength": 2, "maxLength": 2}, "promotion": {"enum": ["q", "r", "b", "n", None]}}, ["from", "to"]),
    "matrix": obj({"rows": {"type": "integer", "minimum": 1, "maximum": 3},
                   "data": arr(arr(N, minItems=1, maxItems=3), minItems=1, maxItems=3)}, ["data"]),
    "color": obj({"r": {"type": "integer", "minimum": 0, "maximum": 255}, "g": {"type": "integer", "minimum": 0,
                  "maximum": 255}, "b": {"type": "integer", "minimum": 0, "maximum": 255},
                  "alpha": {"type": "number", "minimum": 0, "maximum": 1}}, ["r", "g", "b"]),
    "temperature_series": obj({"station": S, "readings": arr({"type": "number", "minimum": -60, "maximum": 60},
                                                            minItems=3, maxItems=6)}, ["station", "readings"]),
    "poll": obj({"question": S, "options": arr({"type": "string", "minLength": 1, "maxLength": 30}, minItems=2,
                                               maxItems=4), "multiple": B}, ["question", "options"]),
    "contact_card": obj({"name": S, "phones": arr(obj({"kind": {"enum": ["home", "work", "mobile"]},
                                                       "number": {"type": "string", "maxLength": 15}},
                                                      ["kind", "number"]), maxItems=2),
                         "email": {"type": "string", "format": "email"}}, ["name"]),
    "dns_record": obj({"type": {"enum": ["A", "AAAA", "CNAME", "TXT", "MX"]}, "name": S, "ttl": {"type": "integer",
                       "minimum": 60, "maximum": 86400}, "value": S}, ["type", "name", "value"]),
    "server": obj({"hostname": S, "ip": {"type": "string", "format": "ipv4"}, "cores": {"type": "integer", "minimum": 1,
                   "maximum": 256}, "tags": {"type": "object", "additionalProperties": S}}, ["hostname", "ip"]),
    "translation": obj({"source_lang": {"type": "string", "minLength": 2, "maxLength": 5}, "target_lang": {"type":
                        "string", "minLength": 2, "maxLength": 5}, "text": S}, ["source_lang", "target_lang", "text"]),
    "score_board": obj({"game": S, "players": arr(obj({"name": S, "score": {"type": "integer", "minimum": -1000,
                                                                           "maximum": 1000}}, ["name", "score"]),
                                                  minItems=1, maxItems=4)}, ["players"]),
    "shipping_quote": obj({"carrier": {"enum": ["ups", "fedex", "dhl"]}, "weight_kg": {"type": "number", "minimum": 0,
                           "maximum": 70}, "destination": ADDRESS, "express": B}, ["carrier", "weight_kg"]),
    "feature_flags": obj({"flags": {"type": "object", "additionalProperties": obj({"enabled": B, "rollout": {
        "type": "integer", "minimum": 0, "maximum": 100}}, ["enabled"])}}, ["flags"]),
    "bank_account": obj({"iban": {"type": "string", "minLength": 15, "maxLength": 34}, "holder": S, "balance": N,
                         "currency": {"enum": ["EUR", "CHF", "USD"]}}, ["iban", "holder"]),
    "medication": obj({"name": S, "dose_mg": {"type": "number", "minimum": 0, "maximum": 1000},
                       "times_per_day": {"type": "integer", "minimum": 1, "maximum": 6},
                       "with_food": B}, ["name", "dose_mg"]),
    "vehicle": obj({"vin": {"type": "string", "minLength": 17, "maxLength": 17}, "make": S, "model": S,
                    "year": {"type": "integer", "minimum": 1950, "maximum": 2026},
                    "electric": B}, ["vin", "make"]),
    "git_commit": obj({"sha": {"type": "string", "minLength": 7, "maxLength": 40}, "author": obj({"name": S, "email":
                       {"type": "string", "format": "email"}}, ["name"]), "message": S,
                       "parents": arr({"type": "string", "minLength": 7, "maxLength": 40}, maxItems=2)}, ["sha", "message"]),
    "tool_call": obj({"name": {"enum": ["get_weather", "search", "send_email"]}, "arguments": {"type": "object"}},
                     ["name", "arguments"]),
    "key_values": {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean", "null"]}},
    "tuple_like": obj({"point": arr(N, minItems=2, maxItems=2), "label": S}, ["point"]),
    "nested_levels": obj({"a": obj({"b": obj({"c": obj({"d": {"type": "string", "maxLength": 8}}, ["d"])}, ["c"])},
                                   ["b"])}, ["a"]),
    "rating_form": obj({"stars": {"enum": [1, 2, 3, 4, 5]}, "comment": {"type": "string", "maxLength": 140},
                        "recommend": B}, ["stars"]),
    "unicode_names": obj({"名前": S, "città": S, "ünïcödé": {"type": "integer"}}, ["名前"]),
    "escapes_in_keys": obj({"quote\"key": S, "back\\slash": I, "tab\tkey": B}, ["quote\"key"]),
    "booleans_and_nulls": obj({"yes": {"const": True}, "no": {"const": False}, "nothing": {"type": "null"},
                               "either": {"type": ["boolean", "null"]}}, ["yes", "no", "nothing"]),
    "numbers_everywhere": obj({"int": I, "num": N, "neg": {"type": "integer", "maximum": -1},
                               "small": {"type": "integer", "minimum": -5, "maximum": 5},
                               "big": {"type": "integer", "minimum": 1000000}}, ["int", "num", "neg", "small", "big"]),
    "const_object": obj({"version": {"const": {"major": 1, "minor": 2}}, "tags": {"const": ["a", "b"]}}, ["version"]),
    # pattern: ECMA-262 regular expressions (the grammar anchors them; jsonschema searches).
    "contact_pattern": obj({"phone": P(r"^\+?[0-9]{1,3}[- ]?\(?[0-9]{3}\)?[- ]?[0-9]{3}-[0-9]{4}$"),
                            "zip": P(r"^\d{5}(-\d{4})?$"), "country": P(r"^[A-Z]{2}$"),
                            "mac": P(r"^([0-9A-F]{2}:){5}[0-9A-F]{2}$")}, ["phone"]),
    "identifiers": obj({"username": P(r"^[a-z_][a-z0-9_]*$", maxLength=16), "slug": P(r"^[a-z0-9]+(?:-[a-z0-9]+)*$"),
                        "hex_color": P(r"^#[0-9a-fA-F]{6}$"), "version": P(r"^v?\d+\.\d+\.\d+(-[0-9A-Za-z.]+)?$")},
                       ["username", "hex_color"]),
    "dates_pattern": obj({"day": P(r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$"),
                          "clock": P(r"^([01]\d|2[0-3]):[0-5]\d$"), "quarter": P(r"^Q[1-4] (19|20)\d{2}$")}, ["day"]),
    "enum_like_pattern": obj({"status": P(r"^(active|inactive|pending)$"), "size": P(r"^(XS|S|M|L|XL|XXL)$"),
                              "code": P(r"^[A-Z]{3}-\d{3}$", minLength=7)}, ["status", "size"]),
    "text_pattern": obj({"sentence": P(r"^[A-Z][^\n]*[.!?]$", maxLength=80), "quoted": P(r'^"[^"\\]*"$'),
                         "path": P(r"^(/[\w.-]+)+/?$"), "tags_csv": P(r"^\w+(,\w+){0,4}$"),
                         "any_two": P(r"^.{2}$"), "csv_cell": P(r"^[^,;]{0,20}$")}, ["sentence", "csv_cell"]),
}

STANDALONE = {
    "any_object": {"type": "object"},
    "any_value": {},
    "tree_recursive": {"$defs": {"node": obj({"value": I, "children": arr({"$ref": "#/$defs/node"}, maxItems=2)},
                                             ["value"])}, "$ref": "#/$defs/node"},
    "linked_list": {"$defs": {"cell": obj({"head": S, "tail": {"anyOf": [{"$ref": "#/$defs/cell"}, {"type": "null"}]}},
                                          ["head", "tail"])}, "$ref": "#/$defs/cell"},
    "shape_oneof": {"oneOf": [obj({"kind": {"const": "circle"}, "radius": N}, ["kind", "radius"]),
                              obj({"kind": {"const": "rect"}, "w": N, "h": N}, ["kind", "w", "h"]),
                              obj({"kind": {"const": "point"}}, ["kind"])]},
    "oneof_types": {"oneOf": [S, I, {"type": "null"}, arr(B, maxItems=3)]},
    "definitions_legacy": {"definitions": {"id": {"type": "string", "format": "uuid"}},
                           "type": "object", "properties": {"ids": arr({"$ref": "#/definitions/id"}, maxItems=3)},
                           "required": ["ids"]},
    "top_level_array": arr(obj({"k": S, "v": I}, ["k", "v"]), minItems=1, maxItems=5),
    "top_level_enum": {"enum": ["red", "green", "blue", 42, None, True]},
    "top_level_string_bounded": {"type": "string", "minLength": 3, "maxLength": 12},
    "top_level_integer_range": {"type": "integer", "minimum": -250, "maximum": 1999},
    "allof_single": {"allOf": [obj({"x": I}, ["x"])]},
    "empty_array_only": arr(I, maxItems=0),
    "map_key_pattern": {"type": "object", "propertyNames": {"pattern": r"^[a-z]{1,10}$"},
                        "additionalProperties": {"type": "integer"}},
    "map_key_length": {"type": "object", "propertyNames": {"maxLength": 3}, "additionalProperties": B},
    "top_level_pattern_unanchored": P(r"\d{3}-\d{2}"),
    "pattern_escapes": P(r"^[\\/\"\t a]{1,6}\.$"),
    "json_pointer_escapes": {"$defs": {"a/b": {"type": "integer"}, "c~d": {"type": "boolean"}}, "type": "object",
                             "properties": {"p": {"$ref": "#/$defs/a~1b"}, "q": {"$ref": "#/$defs/c~0d"}},
                             "required": ["p", "q"]},
}


def strict(s):
    s = copy.deepcopy(s)
    if s.get("type") == "object" and "properties" in s:
        s["required"] = list(s["properties"].keys())
        s["additionalProperties"] = False
    return s


def listed(name, s):
    return {"$defs": {name: s}, "type": "object",
            "properties": {"results": arr({"$ref": f"#/$defs/{name}"}, minItems=1, maxItems=2), "count": I},
            "required": ["results"]}


def nullable(s):
    return {"anyOf": [s, {"type": "null"}]}


def main():
    out = pathlib.Path("tests/data/schemas")
    out.mkdir(parents=True, exist_ok=True)
    for p in out.glob("*.json"):
        p.unlink()
    written = 0
    for name, s in BASE.items():
        for variant, schema in (("", s), ("-strict", strict(s)), ("-listed", listed(name, s)),
                                ("-nullable", nullable(s))):
            (out / f"{name}{variant}.json").write_text(json.dumps(schema, indent=1, ensure_ascii=False) + "\n")
            written += 1
    for name, s in STANDALONE.items():
        (out / f"{name}.json").write_text(json.dumps(s, indent=1, ensure_ascii=False) + "\n")
        written += 1
    print(f"wrote {written} schemas to {out}")


if __name__ == "__main__":
    main()
