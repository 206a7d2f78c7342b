"""The audit trail becomes a hash chain: the records made before it are chained in id order."""

from django.db import migrations, models

from yoco.accounts import chain


def chain_existing(apps, schema_editor):
    AuditRecord = apps.get_model("accounts", "AuditRecord")
    previous = chain.GENESIS
    for record in AuditRecord.objects.order_by("pk").iterator():
        record.previous_hash = previous
        record.hash = chain.record_hash(**chain.content_of(record))
        record.save(update_fields=["previous_hash", "hash"])
        previous = record.hash


class Migration(migrations.Migration):
    dependencies = [("accounts", "0002_auditrecord_moved_in")]

    operations = [
        migrations.AddField(
            model_name="auditrecord",
            name="previous_hash",
            field=models.CharField(default="", max_length=64),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="auditrecord",
            name="hash",
            field=models.CharField(default="", max_length=64),
            preserve_default=False,
        ),
        migrations.RunPython(chain_existing, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="auditrecord",
            name="hash",
            field=models.CharField(max_length=64, unique=True),
        ),
    ]
