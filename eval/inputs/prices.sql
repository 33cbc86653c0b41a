select price*quantity as cost, name||'!' as label
from items
where qty>=10 and price<5.5;
