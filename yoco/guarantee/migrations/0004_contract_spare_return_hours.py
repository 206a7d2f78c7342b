from decimal import Decimal

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("guarantee", "0003_dispute")]

    operations = [
        migrations.AddField(
            model_name="contract",
            name="spare_return_hours",
            field=models.DecimalField(decimal_places=2, default=Decimal("4"), max_digits=7),
        ),
    ]
