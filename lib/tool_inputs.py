"""A tool's input is one Pydantic model (README, "The canvas tools"; docs/search.md): its JSON schema is
the tool definition the model is given, and its validation error is the `is_error` text the model reads.

The models are strict (no "5" for 5, no 1 for true) and refuse fields they do not name, exactly as the
schema says; a rule the schema cannot say (a blank title, a series as long as the labels) is a
validator that raises `input_error`, so its sentence reaches the model unchanged.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import PydanticCustomError

ToolInputT = TypeVar("ToolInputT", bound="ToolInput")

__all__ = [
    "LenientToolInput",
    "ToolInput",
    "ToolInputError",
    "input_error",
    "input_schema",
    "json_type",
    "not_blank",
    "tool_definition",
    "tool_input_parse",
    "validation_sentence",
]


class ToolInput(BaseModel):
    """Base of every tool's input model; `noun` names what it describes in error messages."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)
    noun: ClassVar[str] = "this tool"


class LenientToolInput(ToolInput):
    """A tool input whose unknown fields are ignored rather than refused (the memory tools and
    `schedule_prompt` have always ignored them; the canvas tools refuse them)."""

    model_config = ConfigDict(extra="ignore")


def input_error(message: str) -> PydanticCustomError:
    """An error for a validator to raise. `message` is the predicate (`must not be empty`), put after the
    field's path; a message that starts with a backquote names its fields itself and is used as it is."""
    return PydanticCustomError("tool_input", message)


def not_blank(value: str) -> str:
    """A validator for text that must say something: spaces alone are refused."""
    if not value.strip():
        raise input_error("must not be empty")
    return value


def json_type(value: Any) -> str:
    """The JSON name of a value's type, with its article, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _path(location: tuple[int | str, ...]) -> str:
    path = ""
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def _model_at(model: type[ToolInput], location: tuple[int | str, ...]) -> type[ToolInput]:
    """The (nested) input model that holds the field at `location`."""
    for part in location[:-1]:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        if field is not None:
            model = _inner_model(field.annotation) or model
    return model


def _inner_model(annotation: Any) -> type[ToolInput] | None:
    if isinstance(annotation, type) and issubclass(annotation, ToolInput):
        return annotation
    for argument in get_args(annotation):
        found = _inner_model(argument)
        if found is not None:
            return found
    return None


_TYPE_WORDS = {
    "string_type": "a string",
    "list_type": "an array",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "int_type": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "finite_number": "a finite number",
    "bool_type": "true or false",
}


def _given(value: Any) -> str:
    return json_type(value) if isinstance(value, list | dict) or value is None else f"{value!r}"[:80]


def _predicate(error: dict[str, Any], model: type[ToolInput]) -> str:
    """What is wrong with one field, as the rest of a sentence that starts with the field's name."""
    kind, context, given = error["type"], error.get("ctx", {}), error.get("input")
    location = error["loc"]
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        holder = _model_at(model, location)
        return f"is not a field of {holder.noun}; its fields are: {', '.join(holder.model_fields)}"
    if kind in _TYPE_WORDS:
        bounds = ""
        if kind in {"int_type", "int_from_float"} and len(location) == 1 and location[0] in model.model_fields:
            schema = input_schema(model)["properties"][location[0]]
            schema = next((option for option in schema.get("anyOf", [schema]) if "minimum" in option), schema)
            if "minimum" in schema and "maximum" in schema:
                bounds = f" of at least {schema['minimum']} and at most {schema['maximum']}"
        return f"must be {_TYPE_WORDS[kind]}{bounds}, not {_given(given)}"
    if kind == "literal_error":
        options = context["expected"].replace("'", "").replace(" or ", ", ")
        return f"must be one of {options}, not {_given(given)}"
    if kind == "string_too_short":
        return "must not be empty"
    if kind == "string_too_long":
        return f"is {len(given)} characters; at most {context['max_length']} are allowed"
    if kind == "too_short":
        return "must be a non-empty array" if context["min_length"] == 1 else f"needs at least {context['min_length']}"
    if kind == "too_long":
        return f"has {context['actual_length']} items; at most {context['max_length']} are allowed"
    if kind == "greater_than_equal":
        return f"must be at least {context['ge']}, not {_given(given)}"
    if kind == "less_than_equal":
        return f"must be at most {context['le']}, not {_given(given)}"
    message = error["msg"]
    return message[0].lower() + message[1:]


def _clause(error: dict[str, Any], model: type[ToolInput]) -> str:
    if error["type"] == "tool_input" and error["msg"].startswith("`"):
        return error["msg"]
    where = _path(error["loc"])
    return f"`{where}` {_predicate(error, model)}" if where else _predicate(error, model)


def validation_sentence(error: ValidationError, model: type[ToolInput]) -> str:
    """The first problem of a failed validation of `model` as one sentence that names the field and
    says why; further problems are counted (the model fixes one and hears of the next)."""
    problems = error.errors(include_url=False)
    sentence = _clause(problems[0], model)
    if len(problems) > 1:
        more = len(problems) - 1
        sentence += f" (and {more} more problem{'' if more == 1 else 's'})"
    return sentence


def tool_input_parse(model: type[ToolInputT], data: Any) -> ToolInputT:
    """`data` validated as `model`; raises ToolInputError with `validation_sentence`'s text."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise ToolInputError(validation_sentence(error, model)) from None


class ToolInputError(ValueError):
    """A tool's input that its model refuses; the message is one sentence for the model."""


def _clean(schema: Any, definitions: dict[str, Any]) -> Any:
    """`schema` with every `$ref` inlined and no `title` (the name is the property's key), nor a null default."""
    if isinstance(schema, list):
        return [_clean(item, definitions) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        target = definitions[schema["$ref"].removeprefix("#/$defs/")]
        return _clean({**target, **{k: v for k, v in schema.items() if k != "$ref"}}, definitions)
    cleaned: dict[str, Any] = {}
    for key, value in schema.items():
        if key in {"title", "$defs"} or (key == "default" and value is None):
            continue
        if key == "properties":
            cleaned[key] = {name: _clean(spec, definitions) for name, spec in value.items()}
        else:
            cleaned[key] = _clean(value, definitions)
    return cleaned


def input_schema(model: type[ToolInput]) -> dict[str, Any]:
    """The model's JSON schema as an Anthropic `input_schema`: an object schema, self-contained."""
    schema = model.model_json_schema()
    cleaned = _clean(schema, schema.get("$defs", {}))
    cleaned.pop("description", None)  # the class's docstring is for developers; the tool has its description
    cleaned.setdefault("properties", {})
    return cleaned


def tool_definition(name: str, description: str, model: type[ToolInput]) -> dict[str, Any]:
    """The Anthropic tool definition of the tool `name`, whose input is `model`."""
    return {"name": name, "description": description, "input_schema": input_schema(model)}
