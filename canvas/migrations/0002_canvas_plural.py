from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('canvas', '0001_initial'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='canvasstate',
            options={'verbose_name': 'canvas', 'verbose_name_plural': 'canvases'},
        ),
    ]
