from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("guarantee", "0004_contract_spare_return_hours")]

    operations = [
        migrations.AddField(
            model_name="contractyear",
            name="evidence",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
