"""Every state change of the guarantee: one `do_*` function each, one durable transaction,
its audit record written inside it (`yoco.accounts.actions.audit`). Views, the admin and
management commands call these; nothing else writes contracts, years, credits or overrides.

By domain: `contracts`, `years` (closing, reopening), `credits` (the four-eyes and billing
states), `overrides` (the account team's outcome),
`disputes` (the customer's objection, answered). A refused change raises `ActionError`.
"""

from yoco.guarantee.actions.contracts import (
    NewContract,
    do_create_contract,
    do_set_contract_parameters,
)
from yoco.guarantee.actions.credits import (
    do_approve_credit,
    do_book_order,
    do_export_credit,
    do_void_credit,
)
from yoco.guarantee.actions.disputes import (
    do_open_dispute,
    do_reject_dispute,
    do_uphold_dispute,
)
from yoco.guarantee.actions.overrides import do_clear_override, do_override_outcome
from yoco.guarantee.actions.years import (
    do_close_due_years,
    do_close_year,
    do_close_year_now,
    do_reopen_year,
)
from yoco.lib.errors import ActionError

__all__ = [
    "ActionError",
    "NewContract",
    "do_approve_credit",
    "do_book_order",
    "do_clear_override",
    "do_close_due_years",
    "do_close_year",
    "do_close_year_now",
    "do_create_contract",
    "do_export_credit",
    "do_open_dispute",
    "do_override_outcome",
    "do_reject_dispute",
    "do_reopen_year",
    "do_set_contract_parameters",
    "do_uphold_dispute",
    "do_void_credit",
]
