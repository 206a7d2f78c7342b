"""Small formatting filters for the portal templates."""

from decimal import Decimal

from django import template

register = template.Library()


@register.filter
def pct(value, places=1):
    """A ratio (0.9412) as a percentage string ("94.1 %"); an em dash for None."""
    if value is None or value == "":
        return "—"
    return f"{Decimal(str(value)) * 100:.{int(places)}f} %"


@register.filter
def num(value, places=0):
    """A number with thousands separators."""
    if value is None:
        return "—"
    return f"{Decimal(str(value)):,.{int(places)}f}"


@register.filter
def label(value):
    """An identifier as words: live_resolved -> live resolved."""
    return "—" if value in (None, "") else str(value).replace("_", " ")


@register.filter
def get(mapping, key):
    return mapping.get(key) if mapping else None


@register.filter
def div1000(value):
    """Milliseconds as a short duration: 152300 -> "2 min 32 s"."""
    if value is None:
        return "—"
    seconds = int(value) // 1000
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


@register.filter
def sig(value, digits=3):
    """A float of any size to `digits` significant digits (0.000123, 4.56e-07)."""
    return "—" if value is None else f"{float(value):.{int(digits)}g}"
