"""``POST /graphql``: the part of RunPod's control-plane GraphQL API that tetra-rp and runpod-flash deploy
with, mapped onto the endpoint service (``/endpoints``), served with ariadne (docs/endpoints.md).

Served: ``saveEndpoint`` (create; with ``id``: update), ``deleteEndpoint``, ``myself { endpoints }``,
``myself { endpoint(id) }``, ``gpuTypes`` (with ``lowestPrice``: RunPod's ``ServerlessGpuTypes`` query),
``podTemplate`` (runpod-flash's ``getTemplate``) and ``saveTemplate``. Any other operation gets a GraphQL
error naming it. Authentication is the API's (``Authorization: Bearer <token>``, which is what tetra-rp and
runpod-flash send with ``RUNPOD_API_KEY``); every operation is the caller's tenant's, as on
``/endpoints``: another tenant's endpoint reads as one that does not exist.

Errors are GraphQL errors (HTTP 200 with ``errors``), each naming the field and the fix in ``extensions``;
a body that is not JSON is a 400 problem document, one that is not a GraphQL request Scalar runs (no
``query``, not GraphQL, past the bounds) a 422; never a traceback.
"""

from __future__ import annotations

import json
import logging
import re
from functools import partial
from typing import Any

import anyio
from ariadne import MutationType, ObjectType, QueryType, ScalarType, graphql_sync, make_executable_schema
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLSyntaxError,
    InlineFragmentNode,
    OperationDefinitionNode,
    parse,
)
from pydantic import ValidationError

from scalar.api.access import USER
from scalar.api.auth import current_principal, tenant_filter
from scalar.api.problems import ApiProblem, ProblemRoute, logger
from scalar.domain.errors import InvalidSpecError
from scalar.domain.gpus import RUNPOD_GPU_TYPES, runpod_gpu_type
from scalar.runtime.endpoints.service import EndpointNotFoundError, EndpointService, HandlerNotAllowedError
from scalar.wire.endpoints import EndpointSpecFile
from scalar.wire.endpoints_api import EndpointOut
from scalar.wire.jobs import FieldProblem, field_problems
from scalar.wire.runpod_graphql import (
    endpoint_body,
    endpoint_of_template,
    endpoint_out,
    template_changes,
    template_out,
)

ARIADNE_LOGGER = "scalar.api.graphql.ariadne"
logging.getLogger(ARIADNE_LOGGER).setLevel(logging.CRITICAL)  # ariadne logs every error; format_error logs
MAX_TOKENS = 20_000
MAX_FIELDS = 500
"""Fields an operation may select, fragments expanded (aliases would otherwise repeat a list many times)."""
SERVED = (
    "saveEndpoint",
    "deleteEndpoint",
    "saveTemplate",
    "myself { endpoints }",
    "myself { endpoint(id) }",
    "gpuTypes",
    "podTemplate",
)

# A template's fields, shared by the template inside ``saveEndpoint`` and ``saveTemplate``'s input.
_TEMPLATE_FIELDS = """
  name: String
  imageName: String
  containerDiskInGb: Int
  env: [EnvironmentVariableInput]
  advancedStart: Boolean
  config: JSON
  containerRegistryAuthId: String
  dockerArgs: String
  ports: String
  startScript: String
  readme: String
  volumeInGb: Int
  volumeMountPath: String
  isServerless: Boolean
"""

SCHEMA = """
scalar JSON

type Query {
  myself: User
  gpuTypes(input: GpuTypeFilter): [GpuType]
  podTemplate(id: String!): PodTemplate
}

type Mutation {
  saveEndpoint(input: EndpointInput!): Endpoint
  deleteEndpoint(id: String!): String
  saveTemplate(input: SaveTemplateInput): PodTemplate
}

type User {
  id: String
  endpoints: [Endpoint]
  endpoint(id: String!): Endpoint
}

type Endpoint {
  id: String!
  name: String
  aiKey: String
  gpuIds: String
  gpuCount: Int
  allowedCudaVersions: String
  minCudaVersion: String
  idleTimeout: Int
  executionTimeoutMs: Int
  locations: String
  networkVolumeId: String
  networkVolumeIds: [NetworkVolumeRef]
  flashEnvironmentId: String
  flashBootType: String
  scalerType: String
  scalerValue: Int
  templateId: String
  template: PodTemplate
  type: String
  userId: String
  version: Int
  workersMax: Int
  workersMin: Int
  workersStandby: Int
  workersPFBTarget: Int
  instanceIds: [String]
  activeBuildid: String
  idePodId: String
  createdAt: String
}

type NetworkVolumeRef {
  networkVolumeId: String
  dataCenterId: String
}

type PodTemplate {
  id: String
  name: String
  imageName: String
  containerDiskInGb: Int
  dockerArgs: String
  readme: String
  env: [EnvironmentVariable]
}

type EnvironmentVariable {
  key: String
  value: String
}

type GpuType {
  id: String!
  displayName: String
  manufacturer: String
  memoryInGb: Int
  cudaCores: Int
  secureCloud: Boolean
  communityCloud: Boolean
  securePrice: Float
  communityPrice: Float
  communitySpotPrice: Float
  secureSpotPrice: Float
  maxGpuCount: Int
  maxGpuCountCommunityCloud: Int
  maxGpuCountSecureCloud: Int
  minPodGpuCount: Int
  nodeGroupGpuSizes: [Int]
  throughput: Int
  lowestPrice(input: GpuLowestPriceInput): LowestPrice
}

type LowestPrice {
  stockStatus: String
  minimumBidPrice: Float
  uninterruptablePrice: Float
}

input EnvironmentVariableInput {
  key: String!
  value: String!
}

input NetworkVolumeRefInput {
  networkVolumeId: String
  dataCenterId: String
}

input EndpointTemplateInput {
  TEMPLATE_FIELDS
}

input EndpointInput {
  id: String
  name: String!
  gpuIds: String
  gpuCount: Int
  allowedCudaVersions: String
  minCudaVersion: String
  idleTimeout: Int
  executionTimeoutMs: Int
  locations: String
  networkVolumeId: String
  networkVolumeIds: [NetworkVolumeRefInput]
  flashEnvironmentId: String
  flashBootType: String
  flashboot: Boolean
  scalerType: String
  scalerValue: Int
  templateId: String
  template: EndpointTemplateInput
  type: String
  workersMax: Int
  workersMin: Int
  workersStandby: Int
  workersPFBTarget: Int
  instanceIds: [String]
}

input SaveTemplateInput {
  id: String
  TEMPLATE_FIELDS
}

input GpuTypeFilter {
  id: String
  ids: [String]
}

input GpuLowestPriceInput {
  dataCenterId: String
  gpuCount: Int
  secureCloud: Boolean
  includeAiApi: Boolean
  allowedCudaVersions: [String]
  compliance: [String]
  minDisk: Int
  minMemoryInGb: Int
  minVcpuCount: Int
  countryCode: String
  supportPublicIp: Boolean
  minDownload: Int
  minUpload: Int
  globalNetwork: Boolean
}
""".replace("  TEMPLATE_FIELDS\n", _TEMPLATE_FIELDS.lstrip("\n"))


class UserInputError(Exception):
    """Bad input to an operation: ``field``, what was wrong and the fix (a GraphQL error's extensions)."""

    def __init__(self, field: str, problem: str, fix: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field, self.problem, self.fix = field, problem, fix


def _user_error(exc: Exception) -> UserInputError:
    if isinstance(exc, InvalidSpecError):
        return UserInputError(
            exc.field, exc.problem, exc.hint or "correct this field (docs/formats/endpoint.md)"
        )
    if isinstance(exc, HandlerNotAllowedError):
        return UserInputError("handler", str(exc), exc.fix)
    assert isinstance(exc, ValidationError)
    first = field_problems(exc.errors(), known_fields=sorted(EndpointSpecFile.model_fields))[0]
    return UserInputError(first.field, first.problem, first.fix)


def _no_endpoint(endpoint_id: str, field: str = "id") -> UserInputError:
    return UserInputError(
        field,
        f"no endpoint with id {endpoint_id!r}",
        "give an endpoint id as saveEndpoint returned it (myself { endpoints { id } } lists them)",
    )


def _gpu_type(t: Any) -> dict[str, Any]:
    return {
        "id": t.runpod_id,
        "displayName": t.name,
        "manufacturer": "Nvidia",
        "memoryInGb": t.memory_gb,
        "secureCloud": True,
        "communityCloud": False,
        "maxGpuCount": 8,
        "maxGpuCountSecureCloud": 8,
        "maxGpuCountCommunityCloud": 0,
        "minPodGpuCount": 1,
    }


def build_schema(service: EndpointService) -> Any:
    query, mutation, user, gpu = QueryType(), MutationType(), ObjectType("User"), ObjectType("GpuType")
    json_scalar = ScalarType("JSON")

    def caller(info: Any) -> dict[str, Any]:
        return dict(info.context)

    def visible_view(endpoint_id: str, tenant: str | None) -> EndpointOut | None:
        view = service.get(endpoint_id, tenant=tenant, workers_limit=0)
        return view if view is not None and view.state == "active" else None

    @query.field("myself")
    def resolve_myself(_: Any, info: Any) -> dict[str, Any]:
        return {"id": caller(info)["user"]}

    @user.field("endpoints")
    def resolve_endpoints(_: Any, info: Any) -> list[dict[str, Any]]:
        views = service.list_endpoints(False, tenant=caller(info)["tenant"], limit=1000, workers_limit=0)
        return [endpoint_out(v) for v in views]

    @user.field("endpoint")
    def resolve_endpoint(_: Any, info: Any, id: str) -> dict[str, Any] | None:
        view = visible_view(id, caller(info)["tenant"])
        return None if view is None else endpoint_out(view)

    @query.field("gpuTypes")
    def resolve_gpu_types(_: Any, info: Any, input: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        given = input or {}
        wanted = [*(given.get("ids") or []), *([given["id"]] if given.get("id") else [])]
        if not wanted:
            return [_gpu_type(t) for t in RUNPOD_GPU_TYPES]
        found = [runpod_gpu_type(str(w)) for w in wanted]
        return [_gpu_type(t) for t in found if t is not None]

    @gpu.field("lowestPrice")
    def resolve_lowest_price(_: Any, info: Any, input: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"stockStatus": None, "minimumBidPrice": None, "uninterruptablePrice": None}

    @query.field("podTemplate")
    def resolve_pod_template(_: Any, info: Any, id: str) -> dict[str, Any] | None:
        endpoint_id = endpoint_of_template(id)
        view = None if endpoint_id is None else visible_view(endpoint_id, caller(info)["tenant"])
        return None if view is None else template_out(view)

    @mutation.field("saveEndpoint")
    def resolve_save_endpoint(_: Any, info: Any, input: dict[str, Any]) -> dict[str, Any]:
        who = caller(info)
        stored = None
        if input.get("templateId") and not input.get("template"):
            owner = endpoint_of_template(str(input["templateId"]))
            view = None if owner is None else visible_view(owner, who["tenant"])
            if view is None:
                raise UserInputError(
                    "templateId",
                    f"no template with id {input['templateId']!r}",
                    "give the template in the input (template: {imageName, env, containerDiskInGb})",
                )
            stored = template_out(view)
        try:
            body = endpoint_body(input, stored)
            if input.get("id"):
                changed = service.update(str(input["id"]), body, tenant=who["tenant"], admin=who["admin"])
            else:
                changed = service.create(body, tenant=who["own_tenant"], admin=who["admin"])
        except EndpointNotFoundError:
            raise _no_endpoint(str(input["id"])) from None
        except (InvalidSpecError, ValidationError, HandlerNotAllowedError) as exc:
            raise _user_error(exc) from None
        return endpoint_out(changed)

    @mutation.field("deleteEndpoint")
    def resolve_delete_endpoint(_: Any, info: Any, id: str) -> None:
        try:
            service.delete(id, tenant=caller(info)["tenant"])
        except EndpointNotFoundError:
            raise _no_endpoint(id) from None

    @mutation.field("saveTemplate")
    def resolve_save_template(_: Any, info: Any, input: dict[str, Any] | None = None) -> dict[str, Any]:
        who = caller(info)
        given = input or {}
        owner = endpoint_of_template(str(given.get("id") or ""))
        if owner is None:
            raise UserInputError(
                "id",
                "Scalar keeps a template with its endpoint: only an endpoint's template can be saved",
                "give the templateId saveEndpoint returned, or the template inside saveEndpoint's input",
            )
        try:
            changed = service.update(owner, template_changes(given), tenant=who["tenant"], admin=who["admin"])
        except EndpointNotFoundError:
            raise _no_endpoint(str(given["id"])) from None
        except (InvalidSpecError, ValidationError, HandlerNotAllowedError) as exc:
            raise _user_error(exc) from None
        return template_out(changed)

    return make_executable_schema(SCHEMA, query, mutation, user, gpu, json_scalar)


_UNKNOWN_FIELD = re.compile(r"Cannot query field '(\w+)' on type '(Query|Mutation|User)'")


def format_error(error: GraphQLError, debug: bool = False) -> dict[str, Any]:
    """A GraphQL error as the client sees it: bad input names its field and the fix; an operation Scalar
    does not serve is named with the ones it does; an unexpected failure is logged, not shown."""
    formatted: dict[str, Any] = dict(error.formatted)
    original = error.original_error
    if isinstance(original, UserInputError):
        formatted["message"] = str(original)
        formatted["extensions"] = {
            "code": "BAD_USER_INPUT",
            "field": original.field,
            "problem": original.problem,
            "fix": original.fix,
        }
    elif isinstance(original, GraphQLError):  # a variable's value the schema refuses (its own message)
        formatted["message"] = original.message
        formatted["extensions"] = {"code": "BAD_USER_INPUT"}
    elif original is not None:
        logger.error("unexpected error in a GraphQL operation", exc_info=original)
        formatted["message"] = "internal error: the operation failed; the server log has the details"
        formatted["extensions"] = {"code": "INTERNAL_SERVER_ERROR"}
    elif (found := _UNKNOWN_FIELD.search(error.message)) is not None:
        name, on = found.groups()
        formatted["message"] = (
            f"{name!r} is not served by Scalar ({'myself { ' + name + ' }' if on == 'User' else on + '.' + name}); "
            f"Scalar serves: {', '.join(SERVED)}"
        )
        formatted["extensions"] = {"code": "NOT_SERVED", "operation": name}
    return formatted


REQUEST_FIX = 'send a JSON object {"query": "<a GraphQL document>", "variables": {...}, "operationName": ...}'
REQUEST_SCHEMA = {
    "type": "object",
    "required": ["query"],
    "properties": {
        "query": {"type": "string", "description": "the GraphQL document"},
        "variables": {"type": ["object", "null"], "description": "the operation's variables"},
        "operationName": {"type": ["string", "null"], "description": "which operation of the document"},
    },
}
RESULT_SCHEMA = {
    "type": "object",
    "properties": {
        "data": {"type": ["object", "null"]},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"message": {"type": "string"}, "extensions": {"type": "object"}},
            },
        },
    },
}


def _bad_request(problem_text: str, field: str = "query", status: int = 422) -> ApiProblem:
    """A body that is not a GraphQL request we run: a problem naming the field (the API's error shape),
    400 when it is not JSON, else 422."""
    return ApiProblem(
        status,
        "invalid-request",
        f"{field}: {problem_text}",
        [FieldProblem(field=field, problem=problem_text, fix=REQUEST_FIX)],
    )


def _shape_problem(data: Any) -> str | None:
    """Why ``data`` is not a GraphQL request we run (too big, too many root fields), or ``None``."""
    if not isinstance(data, dict) or not isinstance(data.get("query"), str):
        return "is missing: the body must be a JSON object with a query string"
    if data.get("variables") is not None and not isinstance(data["variables"], dict):
        return "variables must be a JSON object"
    if data.get("operationName") is not None and not isinstance(data["operationName"], str):
        return "operationName must be a string"
    try:
        document = parse(data["query"], max_tokens=MAX_TOKENS)
    except GraphQLSyntaxError as exc:
        return f"is not GraphQL: {exc.message}"
    fragments = {d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)}
    for definition in document.definitions:
        if isinstance(definition, OperationDefinitionNode) and _fields(definition, fragments) > MAX_FIELDS:
            return (
                f"selects more than {MAX_FIELDS} fields (fragments expanded): split it into several requests"
            )
    return None


def _fields(operation: OperationDefinitionNode, fragments: dict[str, FragmentDefinitionNode]) -> int:
    """How many fields ``operation`` selects with its fragments expanded; stops counting past the bound."""
    count = 0
    stack = [operation.selection_set]
    while stack and count <= MAX_FIELDS:
        selection_set = stack.pop()
        for node in selection_set.selections:
            if isinstance(node, FieldNode):
                count += 1
                if node.selection_set is not None:
                    stack.append(node.selection_set)
            elif isinstance(node, FragmentSpreadNode):
                fragment = fragments.get(node.name.value)
                if fragment is not None:
                    stack.append(fragment.selection_set)
                count += 1  # a spread of a cyclic fragment still reaches the bound
            elif isinstance(node, InlineFragmentNode):
                stack.append(node.selection_set)
    return count


def graphql_router(service: EndpointService) -> APIRouter:
    router = APIRouter(tags=["runpod control plane"], route_class=ProblemRoute, dependencies=[USER])
    schema = build_schema(service)

    @router.post(
        "/graphql",
        summary="RunPod's control-plane GraphQL (what tetra-rp and runpod-flash deploy with)",
        response_class=JSONResponse,
        responses={
            200: {
                "description": "the GraphQL result: data, and errors naming each bad field and its fix",
                "content": {"application/json": {"schema": RESULT_SCHEMA}},
            },
            400: {"description": "the body is not JSON"},
            422: {"description": "the body is not a GraphQL request Scalar runs: a problem naming the field"},
        },
        openapi_extra={
            "requestBody": {"required": True, "content": {"application/json": {"schema": REQUEST_SCHEMA}}}
        },
    )
    async def graphql(request: Request) -> JSONResponse:
        try:
            data = json.loads(await request.body() or b"null")
        except (ValueError, RecursionError) as exc:
            raise _bad_request(f"is not JSON ({exc})", "(body)", 400) from None
        problem = _shape_problem(data)
        if problem is not None:
            raise _bad_request(problem)
        principal = current_principal()
        context = {
            "tenant": tenant_filter(),
            "own_tenant": principal.tenant,
            "admin": principal.is_admin,
            "user": principal.tenant,
        }
        run = partial(
            graphql_sync,
            schema,
            {k: data.get(k) for k in ("query", "variables", "operationName")},
            context_value=context,
            error_formatter=format_error,
            logger=ARIADNE_LOGGER,
        )
        _ok, result = await anyio.to_thread.run_sync(run)
        return JSONResponse(result, status_code=200)

    return router
