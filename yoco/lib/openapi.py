"""What every API view's OpenAPI description shares (SPEC 5: the schema names each endpoint's
authentication, request media types and every status code it can answer).

* One bearer security scheme per key table (`clusterKey`, `readToken`, `billingToken`).
* The error body every 4xx answer has: `{"detail": "…"}`.
* `error_responses(...)`: the documented error answers of one endpoint.
* `URL_TOO_LONG`: the HTTP server's own answer to a query string past its limit.
"""

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

# scope (yoco.accounts.auth.SCOPES) → (scheme name, what the key is and where it comes from)
BEARER_SCHEMES = {
    "ingest": ("clusterKey", "a cluster's ingest key (manage.py create_contract prints it)"),
    "read": ("readToken", "a customer's read token (manage.py create_contract prints it)"),
    "billing": ("billingToken", "a billing token (manage.py create_billing_token prints it)"),
}


class BearerKeyScheme(OpenApiAuthenticationExtension):
    """`Authorization: Bearer <key>` of one scope, for every BearerKeyAuthentication subclass."""

    target_class = "yoco.accounts.auth.BearerKeyAuthentication"
    match_subclasses = True

    @property
    def name(self) -> str:
        return BEARER_SCHEMES[self.target.scope][0]

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": BEARER_SCHEMES[self.target.scope][1],
        }


class ErrorSerializer(serializers.Serializer):
    """The body of every error answer."""

    detail = serializers.CharField()


# What each whole-request error means, unless an endpoint says more.
ERROR_MEANINGS = {
    400: "the request cannot be taken as sent (see `detail`)",
    401: "no, unknown, revoked or expired key (`WWW-Authenticate: Bearer`)",
    403: "a key of another kind (scope), or a signed-in user of no customer",
    404: "no such object, or another customer's",
    409: "the object is not in a state that allows this",
    411: "the body does not state its length (`Content-Length`)",
    413: "the body or the number of events is over the limit",
    415: "another Content-Type than the ones listed",
}


def error_responses(*codes: int, **described: str) -> dict[int, OpenApiResponse]:
    """`{code: OpenApiResponse(Error)}` for `codes`, with the default meanings; a keyword
    `e400="…"` replaces the meaning of one code."""
    responses = {}
    for code in codes:
        description = described.get(f"e{code}", ERROR_MEANINGS[code])
        responses[code] = OpenApiResponse(ErrorSerializer, description=description)
    return responses


# gunicorn refuses a request line over 4,094 bytes itself (an HTML page), before Django runs.
URL_TOO_LONG = {
    (414, "text/html"): OpenApiResponse(
        OpenApiTypes.STR,
        description="the URL is longer than the HTTP server takes (gunicorn: a request line "
        "of 4,094 bytes); answered by the server before the platform, as HTML",
    )
}
