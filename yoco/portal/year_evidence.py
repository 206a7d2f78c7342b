"""A closed year's proof for the customer: the annual statement as a PDF (rendered by WeasyPrint
from a template) and the page that re-derives the year and its credit from their evidence
snapshots (`guarantee.evidence`). Another customer's year, an unknown one and an open one are a
404: an open year has neither a statement nor evidence yet."""

from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.template.loader import render_to_string
from django.utils import timezone

from yoco.guarantee import rules
from yoco.guarantee.evidence import EvidenceError, verify_credit, verify_year
from yoco.guarantee.models import ContractYear, Credit
from yoco.guarantee.statement import statement_of
from yoco.lib.vocabulary import OUTCOMES
from yoco.portal.views import customer_view, money


def _closed_year(request, pk: int, number: int) -> ContractYear:
    year = get_object_or_404(
        ContractYear.objects.select_related("contract__customer"),
        contract__customer=request.customer,
        contract_id=pk,
        number=number,
    )
    if year.state != ContractYear.CLOSED:
        raise Http404("an open year has no statement and no evidence yet")
    return year


@customer_view
def year_statement(request, pk, number):
    from weasyprint import HTML  # imported lazily: it loads pango and fonts

    year = _closed_year(request, pk, number)
    statement = statement_of(year)
    contract = year.contract
    html = render_to_string(
        "portal/statement.html",
        {
            "s": statement,
            "contract": contract,
            "annual_value": money(contract.annual_value, contract.currency),
            "credit_amount": (
                money(statement.credit.amount, statement.credit.currency)
                if statement.credit
                else None
            ),
            "outcomes": OUTCOMES,
            "issued": timezone.now(),
        },
        request=request,
    )
    pdf = HTML(string=html, base_url=request.build_absolute_uri("/")).write_pdf()
    response = HttpResponse(pdf, content_type="application/pdf")
    filename = f"yoco-statement-contract-{contract.pk}-year-{year.number}.pdf"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _checked(verify, subject):
    """(verification, error): an error when the evidence cannot be re-derived at all."""
    try:
        return verify(subject), None
    except (rules.UnknownRulesVersion, EvidenceError) as exc:
        return None, str(exc)


@customer_view
def year_verify(request, pk, number):
    year = _closed_year(request, pk, number)
    year_check, year_error = _checked(verify_year, year)
    credit = year.credits.exclude(state=Credit.VOIDED).first()
    credit_check, credit_error = _checked(verify_credit, credit) if credit else (None, None)
    return render(
        request,
        "portal/year_verify.html",
        {
            "year": year,
            "contract": year.contract,
            "outcomes": OUTCOMES,
            "year_check": year_check,
            "year_error": year_error,
            "credit": credit,
            "credit_check": credit_check,
            "credit_error": credit_error,
        },
    )
